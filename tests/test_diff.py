"""`dpguard review --baseline REV` and `dpguard diff OLD NEW`, in process, against scratch git
repositories built here (real git, real files, the JSON checked against schemas/diff.schema.json).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from gitrepo import git

from dpguard.cli import main

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
SCHEMA = json.loads((REPO / "schemas" / "diff.schema.json").read_text(encoding="utf-8"))
SMALL = (EXAMPLES / "small-dense.yaml").read_text(encoding="utf-8")
MOE = (EXAMPLES / "frontier-moe.yaml").read_text(encoding="utf-8")


def scratch(root: Path, base: dict[str, str], head: dict[str, str | None]) -> str:
    """A repository whose first commit holds `base` and whose second applies `head` (None
    deletes); returns the first commit's id."""
    root.mkdir(parents=True, exist_ok=True)
    git(root, "init", "-q")
    for name, text in base.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    commit = git(root, "rev-parse", "HEAD")
    for name, text in head.items():
        if text is None:
            (root / name).unlink()
        else:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text, encoding="utf-8")
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", "head")
    return commit


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def diff_json(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = run(capsys, *argv, "--format", "json")
    data = json.loads(out)
    assert list(jsonschema.Draft202012Validator(SCHEMA).iter_errors(data)) == [], err
    return code, data


def by_path(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["path"]: c for c in data["changes"]}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    monkeypatch.chdir(tmp_path)  # no .dpguard.yaml of the checkout applies
    return root


def test_schema_is_a_valid_2020_12_schema() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


def test_every_status_in_one_review(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = scratch(
        repo,
        {
            "runs/moe.yaml": MOE,
            "runs/gone.yaml": SMALL,
            "runs/old-name.yaml": SMALL.replace("small-dense", "moved"),
            "runs/same.yaml": SMALL.replace("small-dense", "same"),
        },
        {
            "runs/moe.yaml": MOE.replace("pipeline: 16", "pipeline: 8"),
            "runs/gone.yaml": None,
            "runs/old-name.yaml": None,
            "runs/new-name.yaml": SMALL.replace("small-dense", "moved"),
            "runs/added.yaml": (EXAMPLES / "no-pipeline.yaml").read_text(encoding="utf-8"),
        },
    )
    os.chdir(repo)
    files = [
        "runs/moe.yaml",
        "runs/gone.yaml",
        "runs/new-name.yaml",
        "runs/added.yaml",
        "runs/same.yaml",
    ]
    code, data = diff_json(capsys, "review", "--baseline", base, *files)
    assert code == 1  # the new MoE layout is a certain out-of-memory (HR009)
    assert data["baseline"] == {"revision": base, "commit": base}
    changes = by_path(data)
    assert {p: c["status"] for p, c in changes.items()} == {
        "runs/moe.yaml": "modified",
        "runs/gone.yaml": "removed",
        "runs/new-name.yaml": "renamed",
        "runs/added.yaml": "added",
        "runs/same.yaml": "unchanged",
    }
    moe = changes["runs/moe.yaml"]
    assert (moe["before"]["pipeline"], moe["after"]["pipeline"]) == (16, 8)
    assert (moe["before"]["microbatches"], moe["after"]["microbatches"]) == (120, 60)
    assert moe["before"]["schedule"] == moe["after"]["schedule"] == "dualpipe"
    assert moe["before"]["memory_verdict"] == "likely-oom"  # at the usable line (ADV004)
    assert moe["after"]["memory_verdict"] == "oom"
    assert (moe["before"]["passed"], moe["after"]["passed"]) == (True, False)
    delta = moe["delta"]
    assert delta["gpu_hours"] == pytest.approx(
        moe["after"]["gpu_hours"] - moe["before"]["gpu_hours"]
    )
    assert delta["gpu_hours"] < 0  # a shallower DualPipe has a smaller bubble here
    assert delta["gpu_hours_fraction"] == pytest.approx(
        delta["gpu_hours"] / moe["before"]["gpu_hours"]
    )
    assert delta["bubble_points"] == pytest.approx(
        (moe["after"]["bubble"] - moe["before"]["bubble"]) * 100
    )
    assert delta["memory_gib"] > 20
    assert "HR009" in {f["code"] for f in moe["findings"]["added"]}
    assert [k["key"] for k in moe["changed_keys"]] == ["parallelism.pipeline"]
    assert moe["changed_keys"][0]["line"] == 61  # where the new version writes it

    gone = changes["runs/gone.yaml"]
    assert gone["after"] is None and gone["before"]["schedule"] == "1f1b"
    assert gone["delta"]["gpu_hours"] == pytest.approx(-gone["before"]["gpu_hours"])
    assert gone["delta"]["bubble_points"] is None
    renamed = changes["runs/new-name.yaml"]
    assert renamed["base_path"] == "runs/old-name.yaml"
    assert renamed["delta"]["gpu_hours"] == 0
    assert "runs/old-name.yaml" not in changes  # one rename, not a removal and an addition
    added = changes["runs/added.yaml"]
    assert added["before"] is None and added["base_path"] is None
    assert added["after"]["schedule"] == "none" and added["after"]["bubble"] == 0
    assert added["delta"]["gpu_hours"] == pytest.approx(added["after"]["gpu_hours"])
    assert added["delta"]["gpu_hours_fraction"] is None
    same = changes["runs/same.yaml"]
    assert same["before"] == {**same["after"], "path": "runs/same.yaml"}
    assert same["findings"] == {"added": [], "resolved": [], "unchanged": 0}
    totals = data["totals"]
    assert totals["unsized"] == 0
    assert totals["gpu_hours_delta"] == pytest.approx(
        sum(c["delta"]["gpu_hours"] for c in data["changes"])
    )
    assert data["summary"] == {"files": 4, "failed": 1, "errors": 1, "warnings": 2}


def test_unparseable_at_the_base_is_not_the_change_s_error(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = SMALL.replace("  gpus: 64\n", "  gpus: [64\n")
    base = scratch(repo, {"a.yaml": broken}, {"a.yaml": SMALL})
    os.chdir(repo)
    code, data = diff_json(capsys, "review", "--baseline", base, "a.yaml")
    assert code == 0
    (change,) = data["changes"]
    assert change["status"] == "modified"
    assert change["before"]["state"] == "unparseable" and change["before"]["passed"] is False
    assert change["before"]["gpu_hours"] is None and change["delta"]["gpu_hours"] is None
    assert [f["code"] for f in change["findings"]["resolved"]] == ["Y001"]
    assert change["findings"]["added"] == []
    assert data["totals"]["unsized"] == 1
    code, out, _ = run(capsys, "review", "--baseline", base, "a.yaml")
    assert "layout: unparseable (1 error) -> 1f1b P=2" in out
    assert "- a.yaml:" in out and "Y001" in out and "(resolved)" in out


def test_touched_but_unchanged_and_a_moved_key(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Comments, key order and quantity spelling change, the manifest does not: no delta, no
    finding added or resolved, though every finding moved to another line."""
    mistakes = (EXAMPLES / "mistakes.yaml").read_text(encoding="utf-8")
    touched = SMALL.replace("  tokens: 1T\n", "  tokens: 1000B  # the same budget\n")
    training = touched[touched.index("training:") :]
    reordered = "# moved the training section up\n" + touched.replace(training, "").replace(
        "cluster:", training + "cluster:"
    )
    base = scratch(
        repo,
        {"a.yaml": SMALL, "bad.yaml": mistakes, "same.yaml": SMALL},
        {"a.yaml": reordered, "bad.yaml": "# a comment on top\n\n" + mistakes},
    )
    os.chdir(repo)
    code, data = diff_json(capsys, "review", "--baseline", base, "a.yaml", "bad.yaml", "same.yaml")
    assert code == 1  # bad.yaml still fails: its errors are not this change's, but remain
    changes = by_path(data)
    a = changes["a.yaml"]
    assert a["status"] == "modified"
    assert a["changed_keys"] == []
    assert a["delta"] == {
        "gpu_hours": 0,
        "gpu_hours_fraction": 0,
        "bubble_points": 0,
        "memory_gib": 0,
        "cost": None,
    }
    bad = changes["bad.yaml"]
    assert bad["findings"]["added"] == bad["findings"]["resolved"] == []
    assert bad["findings"]["unchanged"] == 7
    assert changes["same.yaml"]["status"] == "unchanged"
    code, out, _ = run(capsys, "review", "--baseline", base, "--format", "github", "bad.yaml")
    assert not [line for line in out.splitlines() if line.startswith("::")]


def test_reports_are_deterministic(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = scratch(repo, {"m.yaml": MOE}, {"m.yaml": MOE.replace("pipeline: 16", "pipeline: 8")})
    os.chdir(repo)
    for fmt in ("json", "markdown", "text", "github"):
        first = run(capsys, "review", "--baseline", base, "--format", fmt, "m.yaml")
        second = run(capsys, "review", "--baseline", base, "--format", fmt, "m.yaml")
        assert first == second
        assert first[0] == 1
    assert main(["review", "--baseline", base, "--format", "markdown", "-o", "c.md", "m.yaml"])
    capsys.readouterr()
    assert Path("c.md").read_text(encoding="utf-8") == first_markdown(capsys, base)


def first_markdown(capsys: pytest.CaptureFixture[str], base: str) -> str:
    return run(capsys, "review", "--baseline", base, "--format", "markdown", "m.yaml")[1]


def test_markdown_comment(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = scratch(
        repo,
        {"m.yaml": MOE, "s.yaml": SMALL},
        {"m.yaml": MOE.replace("pipeline: 16", "pipeline: 8"), "s.yaml": None},
    )
    os.chdir(repo)
    _, out, _ = run(
        capsys, "review", "--baseline", base, "--format", "markdown", "m.yaml", "s.yaml"
    )
    lines = out.splitlines()
    assert lines[:2] == ["<!-- dpguard-diff -->", "## dpguard: what this change costs"]
    row = next(line for line in lines if line.startswith("| `m.yaml` |"))
    assert row.startswith("| `m.yaml` | modified since " + base + " | 2,634,431 -> 2,462,991 |")
    assert "| 3.74% -> 3.23% |" in row and "passed -> failed |" in row
    removed = next(line for line in lines if line.startswith("| `s.yaml` |"))
    hours = re.search(r"\| ([\d,]+) -> - \| -([\d,]+), -100.0% \|", removed)
    assert "removed since" in removed and hours is not None and hours[1] == hours[2]
    assert next(line for line in lines if line.startswith("| **total**"))
    assert "### `m.yaml`: modified since " + base in lines
    assert "Changed: parallelism.pipeline 16 -> 8." in lines
    assert any(line.startswith("| new | error | HR009 | m.yaml:61:3 |") for line in lines)
    assert any(line.startswith("| resolved | warning | ADV002 |") for line in lines)


def test_github_annotations_on_the_lines_that_moved_the_cost(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    head = MOE.replace("pipeline: 16", "pipeline: 8").replace("  tokens: 14.8T", "  tokens: 16T")
    base = scratch(repo, {"m.yaml": MOE}, {"m.yaml": head})
    os.chdir(repo)
    _, out, _ = run(capsys, "review", "--baseline", base, "--format", "github", "m.yaml")
    notices = [line for line in out.splitlines() if line.startswith("::notice")]
    assert [re.search(r"line=(\d+)", n)[1] for n in notices] == ["61", "42"]  # type: ignore[index]
    assert notices[0].startswith(
        "::notice file=m.yaml,line=61,col=3,title=dpguard cost%3A parallelism.pipeline::"
        "parallelism.pipeline 16 -> 8 - this change moves GPU-hours 2,634,431 -> "
    )
    assert "::error file=m.yaml,line=61,col=3,title=HR009::" in out
    assert out.splitlines()[-1].startswith("1 manifest checked now: 0 passed, 1 failed")


def test_diff_of_two_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    monkeypatch.chdir(tmp_path)
    Path("old.yaml").write_text(SMALL, encoding="utf-8")
    Path("new.yaml").write_text(SMALL.replace("tokens: 1T", "tokens: 2T"), encoding="utf-8")
    code, data = diff_json(capsys, "diff", "old.yaml", "new.yaml")
    assert code == 0 and data["baseline"] is None
    (change,) = data["changes"]
    assert (change["path"], change["base_path"], change["status"]) == (
        "new.yaml",
        "old.yaml",
        "modified",
    )
    assert change["delta"]["gpu_hours_fraction"] == pytest.approx(1.0)
    assert change["delta"]["bubble_points"] == 0
    assert [(k["key"], k["before"], k["after"]) for k in change["changed_keys"]] == [
        ("training.tokens", 10**12, 2 * 10**12)
    ]
    code, out, _ = run(capsys, "diff", "old.yaml", "old.yaml")
    assert code == 0 and out.startswith("old.yaml: unchanged (passed)\n")
    code, _, err = run(capsys, "diff", "old.yaml", "missing.yaml")
    assert code == 2 and err == "dpguard: error: missing.yaml: no such file\n"


# ---- policies on the change ------------------------------------------------------------------

CHANGE_RULE = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {{name: team-cost, version: 1.0.0}}
rules:
  - id: COST001
    kind: {kind}
    title: A change that adds more than 10% GPU-hours needs a waiver
    when:
      all:
        - {{fact: change.status, in: [modified, renamed]}}
        - {{fact: change.gpu_hours_delta_fraction, gt: 0.10}}
    message: >-
      this change adds {{{{ change.gpu_hours_delta | thousands }}}} GPU-hours
      ({{{{ change.gpu_hours_delta_fraction | pct }}}}); bubble
      {{{{ '%+.2f' | format(change.bubble_delta_points) }}}} points
    docs: Budget owners sign off on large increases.
"""


def team(directory: Path, kind: str = "reject") -> str:
    path = directory / "team.yaml"
    path.write_text(CHANGE_RULE.format(kind=kind), encoding="utf-8")
    return str(path)


def test_a_rule_on_the_change_fires_and_stays_silent(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    policy = team(repo.parent)
    base = scratch(
        repo,
        {"big.yaml": SMALL, "small.yaml": SMALL, "new.yaml": "# placeholder\n"},
        {
            "big.yaml": SMALL.replace("tokens: 1T", "tokens: 1.5T"),  # +50 %
            "small.yaml": SMALL.replace("tokens: 1T", "tokens: 1.05T"),  # +5 %
            "new.yaml": None,
            "added.yaml": SMALL.replace("tokens: 1T", "tokens: 3T"),  # added: no fraction
        },
    )
    os.chdir(repo)
    argv = ["review", "--baseline", base, "--policy", policy, "big.yaml", "small.yaml"]
    code, data = diff_json(capsys, *argv, "added.yaml")
    assert code == 1
    changes = by_path(data)
    fired = [f for f in changes["big.yaml"]["findings"]["added"] if f["code"] == "COST001"]
    assert [(f["severity"], f["message"]) for f in fired] == [
        ("error", "this change adds 56,870 GPU-hours (50.0%); bubble +0.00 points")
    ]
    assert changes["small.yaml"]["findings"]["added"] == []
    assert changes["added.yaml"]["findings"]["added"] == []
    # Without --baseline the rule is not judged: the same files pass.
    code, out, _ = run(capsys, "review", "--policy", policy, "big.yaml", "small.yaml")
    assert code == 0 and "COST001" not in out
    # SARIF with --baseline reports the new versions with the rule on the change judged.
    code, out, _ = run(capsys, *argv, "--format", "sarif")
    results = json.loads(out)["runs"][0]["results"]
    assert code == 1 and [r["ruleId"] for r in results if r["ruleId"] == "COST001"] == ["COST001"]


def test_a_rule_on_the_change_can_be_waived(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = scratch(repo, {"big.yaml": SMALL}, {"big.yaml": SMALL.replace("1T", "1.5T")})
    policy = team(repo, kind="advise")  # inside the repository (dpguard.confine)
    (repo / ".dpguard.yaml").write_text(
        f"policies: [{policy}]\nwaivers: waivers.yaml\nfail_on: warning\n", encoding="utf-8"
    )
    (repo / "waivers.yaml").write_text(
        "apiVersion: dpguard/v1\nkind: Waivers\nwaivers:\n"
        "  - {rule: COST001, match: big.yaml, reason: approved in PLAN-7, owner: budget,"
        " expires: 2030-01-01}\n",
        encoding="utf-8",
    )
    os.chdir(repo)
    code, data = diff_json(capsys, "review", "--baseline", base, "--date", "2029-12-01", "big.yaml")
    (added,) = data["changes"][0]["findings"]["added"]
    assert (added["code"], added["waived"], code) == ("COST001", True, 0)


def test_decision_rows_cannot_read_change_facts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    text = CHANGE_RULE.format(kind="decision").replace(
        "    docs:", "    recommend: {schedule: 1f1b}\n    docs:"
    )
    Path("team.yaml").write_text(text, encoding="utf-8")
    code, out, _ = run(capsys, "lint-policies", "team.yaml")
    assert code == 2
    assert (
        "team.yaml:10:12: fact 'change.status' is set only when review --baseline or diff "
        "compares a change, so this rule would never see it set"
    ) in out


def test_change_facts_are_listed(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "facts")
    listed = {line.split()[0] for line in out.splitlines() if line.startswith("change.")}
    assert code == 0 and listed == {
        "change.status",
        "change.gpu_hours_delta",
        "change.gpu_hours_delta_fraction",
        "change.bubble_delta_points",
        "change.schedule_changed",
    }


# ---- bad input ---------------------------------------------------------------------------------


def test_an_unknown_revision(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scratch(repo, {"a.yaml": SMALL}, {"a.yaml": SMALL.replace("1T", "2T")})
    os.chdir(repo)
    code, out, err = run(capsys, "review", "--baseline", "no-such-branch", "a.yaml")
    assert (code, out) == (2, "")
    assert err.startswith("dpguard: error: unknown revision 'no-such-branch' in ")
    assert "git fetch origin BRANCH" in err and "Traceback" not in err
    code, _, err = run(capsys, "review", "--baseline=--upload-pack=x", "a.yaml")
    assert code == 2 and "cannot start with '-'" in err


def test_a_shallow_clone_without_the_base(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = scratch(repo, {"a.yaml": SMALL}, {"a.yaml": SMALL.replace("1T", "2T")})
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{repo}", str(clone))
    os.chdir(clone)
    code, out, err = run(capsys, "review", "--baseline", base, "a.yaml")
    assert (code, out) == (2, "")
    assert err.startswith(f"dpguard: error: revision '{base}' is not in this clone of ")
    assert "it is shallow" in err and "fetch-depth: 0" in err and "git fetch --unshallow" in err


def test_paths_outside_the_repository_and_no_repository(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = scratch(repo, {"a.yaml": SMALL}, {})
    outside = tmp_path / "outside.yaml"
    outside.write_text(SMALL, encoding="utf-8")
    os.chdir(repo)
    code, out, err = run(capsys, "review", "--baseline", base, "a.yaml", str(outside))
    assert (code, out) == (2, "")
    assert err.startswith(f"dpguard: error: {outside}: outside the git repository at ")
    assert f"--baseline {base}" in err
    code, _, err = run(capsys, "review", "--baseline", base, "missing.yaml")
    assert code == 2
    assert f"missing.yaml: no such file, neither now nor at {base}" in err
    lonely = tmp_path / "lonely"
    lonely.mkdir()
    os.chdir(lonely)
    Path("a.yaml").write_text(SMALL, encoding="utf-8")
    code, _, err = run(capsys, "review", "--baseline", "HEAD", "a.yaml")
    assert code == 2 and "is not inside a git repository" in err and "Traceback" not in err


def test_only_manifests_with_a_baseline(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    k8s = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
    base = scratch(
        repo,
        {"k8s.yaml": k8s, "gone-k8s.yaml": k8s, "m.yaml": SMALL},
        {"k8s.yaml": k8s + "spec: {}\n", "gone-k8s.yaml": None, "m.yaml": SMALL + "\n"},
    )
    os.chdir(repo)
    argv = ["review", "--baseline", base, "--only-manifests"]
    code, data = diff_json(capsys, *argv, "k8s.yaml", "gone-k8s.yaml", "m.yaml")
    assert code == 0 and [c["path"] for c in data["changes"]] == ["m.yaml"]


# ---- money -------------------------------------------------------------------------------------

PRICES = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team-prices, version: 1.0.0}
settings:
  cost_per_gpu_hour:
    currency: EUR
    A100-80GB: 1.5
    default: 3.0
    sources: the team's 2025 contract
rules: []
"""


def test_cost_beside_gpu_hours(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (repo.parent / "prices.yaml").write_text(PRICES, encoding="utf-8")
    h100 = SMALL.replace("A100-80GB", "H100-SXM")
    base = scratch(repo, {"a.yaml": SMALL}, {"a.yaml": h100})
    os.chdir(repo)
    argv = ["review", "--baseline", base, "--policy", str(repo.parent / "prices.yaml"), "a.yaml"]
    code, data = diff_json(capsys, *argv)
    assert code == 0
    (change,) = data["changes"]
    before, after = change["before"], change["after"]
    assert before["cost"] == pytest.approx(before["gpu_hours"] * 1.5)
    assert after["cost"] == pytest.approx(after["gpu_hours"] * 3.0)  # the default rate
    assert change["delta"]["cost"] == pytest.approx(after["cost"] - before["cost"])
    assert data["totals"]["currency"] == "EUR"
    assert data["totals"]["cost_delta"] == pytest.approx(change["delta"]["cost"])
    _, out, _ = run(capsys, *argv, "--format", "markdown")
    assert f"Cost (EUR): {before['cost']:,.0f} EUR -> {after['cost']:,.0f} EUR" in out
    _, out, _ = run(capsys, "review", "--baseline", base, "a.yaml")
    assert "cost" not in out  # no prices, no money


def test_a_cost_setting_without_a_currency_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("prices.yaml").write_text(PRICES.replace("    currency: EUR\n", ""), encoding="utf-8")
    code, out, _ = run(capsys, "lint-policies", "prices.yaml")
    assert code == 2 and "currency" in out


def test_a_price_for_an_accelerator_no_manifest_can_name_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Manifests carry the catalog id: a price keyed by an alias or an unknown name would never
    apply (the default would, silently), so the policy fails to load, at the key."""
    monkeypatch.chdir(tmp_path)
    prices = PRICES.replace(
        "    default: 3.0\n", "    default: 3.0\n    H100: 2.0\n    B300X: 4.0\n"
    )
    Path("prices.yaml").write_text(prices, encoding="utf-8")
    code, out, _ = run(capsys, "lint-policies", "prices.yaml")
    assert code == 2
    assert "cost_per_gpu_hour: 'H100' is 'H100-SXM' in the catalog: write 'H100-SXM'" in out
    assert "cost_per_gpu_hour: unknown accelerator 'B300X'" in out


# ---- the composite action ---------------------------------------------------------------------


def test_action_yml_is_a_valid_github_action(tmp_path: Path) -> None:
    """Against the published GitHub Action schema (SchemaStore's, which check-jsonschema ships:
    no network needed)."""
    # next to this interpreter (the test environment's own), else on PATH
    tool = shutil.which("check-jsonschema", path=str(Path(sys.executable).parent)) or shutil.which(
        "check-jsonschema"
    )
    assert tool, "check-jsonschema is a test dependency"
    done = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-actions", str(REPO / "action.yml")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bad = tmp_path / "action.yml"
    bad.write_text("name: x\nruns: {using: composite}\n", encoding="utf-8")
    broken = subprocess.run(
        [tool, "--builtin-schema", "vendor.github-actions", str(bad)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert broken.returncode == 1, broken.stdout  # no description, no steps: not an action
    assert "description" in broken.stdout


# ---- the docs/ci.md recipes --------------------------------------------------------------------

BASH = ["bash", "--noprofile", "--norc", "-eo", "pipefail"]
STUB = """#!/bin/sh
printf '%s\\n' "$@" > "$RECORD/args"
for arg in "$@"; do case "$arg" in body@*) cp "${arg#body@}" "$RECORD/body.md";; esac; done
while [ $# -gt 0 ]; do [ "$1" = --body-file ] && cp "$2" "$RECORD/body.md"; shift; done
"""


def ci_blocks() -> dict[str, str]:
    text = (REPO / "docs" / "ci.md").read_text(encoding="utf-8")
    found = re.findall(r"^```(\w+)\n(.*?)^```$", text, re.M | re.S)
    return {body.splitlines()[0]: body for _lang, body in found}


def recipe_repo(tmp_path: Path) -> tuple[Path, dict[str, str], Path]:
    """A pull request that makes the MoE run shallower, deletes a run and touches a
    Kubernetes file, with `gh` and `curl` stubs that record what they were asked to post."""
    root = tmp_path / "pr"
    k8s = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
    scratch(
        root,
        {"runs/moe.yaml": MOE, "runs/old.yaml": SMALL, "k8s.yaml": k8s},
        {
            "runs/moe.yaml": MOE.replace("pipeline: 16", "pipeline: 8"),
            "runs/old.yaml": None,
            "k8s.yaml": k8s + "spec: {}\n",
        },
    )
    bin_dir, record = tmp_path / "bin", tmp_path / "record"
    bin_dir.mkdir()
    record.mkdir()
    for tool in ("gh", "curl"):
        (bin_dir / tool).write_text(STUB, encoding="utf-8")
        (bin_dir / tool).chmod(0o755)
    dpguard = shutil.which("dpguard")
    assert dpguard
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "GITHUB_", "CI_"))}
    env["PATH"] = os.pathsep.join([str(bin_dir), str(Path(dpguard).parent), env["PATH"]])
    env["RECORD"] = str(record)
    return root, env, record


def test_github_cost_recipe(tmp_path: Path) -> None:
    import yaml

    workflow = yaml.safe_load(ci_blocks()["# .github/workflows/dpguard-cost.yaml"])
    job = workflow["jobs"]["cost"]
    steps = job["steps"]
    assert steps[0] == {"uses": "actions/checkout@v5", "with": {"fetch-depth": 0}}
    assert job["permissions"]["pull-requests"] == "write"
    upload = next(s for s in steps if s.get("uses", "").startswith("github/codeql-action/"))
    assert upload["with"]["sarif_file"] == "dpguard.sarif"
    comment = next(s for s in steps if "gh pr comment" in s.get("run", ""))
    assert "--edit-last --create-if-none" in comment["run"]  # one sticky comment

    root, env, record = recipe_repo(tmp_path)
    base = git(root, "rev-parse", "HEAD~1")
    review = next(s for s in steps if s.get("id") == "review")
    assert review["env"] == {"BASE_SHA": "${{ github.event.pull_request.base.sha }}"}
    output = tmp_path / "github-output"
    output.write_text("", encoding="utf-8")
    done = subprocess.run(
        [*BASH, "-c", review["run"]],
        cwd=root,
        env={**env, "BASE_SHA": base, "GITHUB_OUTPUT": str(output)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert output.read_text(encoding="utf-8") == "status=1\n"  # HR009 on the new layout
    assert "::error file=runs/moe.yaml,line=61,col=3,title=HR009::" in done.stdout
    assert "title=dpguard cost%3A parallelism.pipeline::" in done.stdout
    sarif = json.loads((root / "dpguard.sarif").read_text(encoding="utf-8"))
    assert "HR009" in {r["ruleId"] for r in sarif["runs"][0]["results"]}
    body = (root / "dpguard-cost.md").read_text(encoding="utf-8")
    assert body.startswith("<!-- dpguard-diff -->\n")
    assert "| `runs/old.yaml` | removed since " in body and "k8s.yaml" not in body

    env_comment = {**env, "GH_TOKEN": "t", "PR_NUMBER": "7"}
    subprocess.run([*BASH, "-c", comment["run"]], cwd=root, env=env_comment, check=True)
    assert (record / "body.md").read_text(encoding="utf-8") == body


def test_gitlab_cost_recipe(tmp_path: Path) -> None:
    import yaml

    job = yaml.safe_load(ci_blocks()["# .gitlab-ci.yml (cost note)"])["dpguard-cost"]
    assert job["variables"]["GIT_DEPTH"] == "0"
    assert job["script"][0] == 'python -m pip install "$DPGUARD_PIP_SPEC"'
    root, env, record = recipe_repo(tmp_path)
    ci = {
        "CI_MERGE_REQUEST_DIFF_BASE_SHA": git(root, "rev-parse", "HEAD~1"),
        "CI_API_V4_URL": "https://gitlab.example.com/api/v4",
        "CI_PROJECT_ID": "12",
        "CI_MERGE_REQUEST_IID": "34",
        "DPGUARD_NOTE_TOKEN": "secret",
    }
    done = subprocess.run(
        [*BASH, "-c", "\n".join(job["script"][1:])],
        cwd=root,
        env={**env, **ci},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr  # the job fails as the review does
    assert "runs/moe.yaml: modified since " in done.stdout
    args = (record / "args").read_text(encoding="utf-8").splitlines()
    assert args[-1] == "https://gitlab.example.com/api/v4/projects/12/merge_requests/34/notes"
    assert "PRIVATE-TOKEN: secret" in args
    body = (record / "body.md").read_text(encoding="utf-8")
    assert body == (root / "dpguard-cost.md").read_text(encoding="utf-8")
    assert "### `runs/moe.yaml`: modified since " in body


def test_a_directory_under_a_baseline_compares_what_the_hook_would_pass(
    repo: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """review --baseline REV DIR: the manifests under DIR now and at REV, so a manifest
    deleted from the directory is reported as removed; other files are left alone."""
    base = scratch(
        repo,
        {"runs/moe.yaml": MOE, "runs/gone.yaml": SMALL, "runs/notes.txt": "x\n"},
        {
            "runs/moe.yaml": MOE.replace("pipeline: 16", "pipeline: 8"),
            "runs/gone.yaml": None,
            "runs/added.yaml": (EXAMPLES / "no-pipeline.yaml").read_text(encoding="utf-8"),
            "runs/k8s.yaml": "apiVersion: v1\nkind: ConfigMap\n",
        },
    )
    os.chdir(repo)
    _, data = diff_json(capsys, "review", "--baseline", base, "runs")
    assert {p: c["status"] for p, c in by_path(data).items()} == {
        "runs/moe.yaml": "modified",
        "runs/gone.yaml": "removed",
        "runs/added.yaml": "added",
    }
