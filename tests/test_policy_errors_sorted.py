"""Policy load errors come in reading order, (file, line, col), so the first problem in a file,
which often causes the rest, is the first one printed."""

from __future__ import annotations

from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.policy.load import by_position

TEAM = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: team, version: 1.0.0}
settings:
  disable: [HR033]
rules:
  - id: TEAM001
    kind: advise
    title: t
    when: {fact: cluster.gpu, ge: 64}
    message: "{{ cluster.gpux }}"
    docs: d
  - id: TEAM002
    kind: advise
    title: t
    when: {fact: cluster.gpus, gte: 64}
    message: m
    docs: d
"""

OTHER = """\
apiVersion: dpguard/v1
kind: PolicySet
metadata: {name: other, version: 1.0.0}
rules:
  - id: OTHER001
    kind: advise
    title: t
    when: {fact: cluster.gpus, ge: 64}
    message: m
    docs: d
    waivable: maybe
"""


def test_problems_of_one_file_in_line_order(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    team = tmp_path / "team.yaml"
    team.write_text(TEAM, encoding="utf-8")
    assert main(["lint-policies", str(team)]) == 2
    # the disable list is checked after the rules are read, yet it is written first
    assert capsys.readouterr().out.splitlines() == [
        f"{team}:5:13: disable names unknown rule HR033 (did you mean 'HR003'?)",
        f"{team}:10:12: unknown fact 'cluster.gpu' (did you mean 'cluster.gpus'?) "
        "(`dpguard facts` lists them)",
        f"{team}:11:5: message uses unknown fact 'cluster.gpux' (did you mean 'cluster.gpus'?)",
        f"{team}:16:32: unknown operator 'gte' (did you mean 'ge'?); operators: equals, "
        "not_equals, lt, le, gt, ge, in, not_in, divisible_by, matches, exists",
    ]


def test_files_in_layering_order_and_the_config_last(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "z-team.yaml").write_text(TEAM, encoding="utf-8")
    (tmp_path / "a-other.yaml").write_text(OTHER, encoding="utf-8")
    # layered z-team first, then a-other; the config's disable list after both
    (tmp_path / ".dpguard.yaml").write_text(
        "policies: [z-team.yaml, a-other.yaml]\ndisable: [ADV01]\n", encoding="utf-8"
    )
    monkeypatch.chdir(tmp_path)
    assert main(["review", str(tmp_path / "nothing.yaml")]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0] == "dpguard: error: broken policy:"
    where = [line.strip().split(": ", 1)[0] for line in err[1:]]
    files = [w.rsplit(":", 2)[0] for w in where]
    assert [Path(f).name for f in files] == [
        *["z-team.yaml"] * 4,
        "a-other.yaml",
        ".dpguard.yaml",
    ]
    lines = [(Path(f).name, int(w.rsplit(":", 2)[1])) for f, w in zip(files, where, strict=True)]
    assert lines[:4] == [("z-team.yaml", n) for n in (5, 10, 11, 16)]


def test_unpositioned_problems_stay_last_in_their_order() -> None:
    problems = [
        "no policy set provides the settings: memory_headroom",
        "b.yaml:3:1: late",
        "a.yaml:9:9: second file",
        "b.yaml:1:5: early",
        "no decision rules are loaded: dpguard cannot recommend a schedule",
        "b.yaml:1:2: earliest",
    ]
    assert by_position(problems, ["b.yaml", "a.yaml"]) == [
        "b.yaml:1:2: earliest",
        "b.yaml:1:5: early",
        "b.yaml:3:1: late",
        "a.yaml:9:9: second file",
        "no policy set provides the settings: memory_headroom",
        "no decision rules are loaded: dpguard cannot recommend a schedule",
    ]
