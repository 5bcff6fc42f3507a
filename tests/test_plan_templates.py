"""The one-page plan's templates (templates/plan.md.j2, templates/rollback.md.j2): every branch,
a team's own templates with `--templates DIR`, and templates that fail (undefined names, syntax
errors, the sandbox) exiting 2 with a positioned message and no traceback."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from dpguard import perf, sizing
from dpguard.check import check_file
from dpguard.cli import main
from dpguard.planner.plan import Plan
from dpguard.planner.render import _environment
from dpguard.policy.load import load_policies

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"
FRONTIER = str(EXAMPLES / "frontier-moe.yaml")
SMALL = str(EXAMPLES / "small-dense.yaml")
IMPOSSIBLE = (REPO / "tests" / "data" / "impossible.yaml").read_text(encoding="utf-8")


def plan(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["plan", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def variant(tmp_path: Path, name: str, patch: dict[str, dict[str, object]]) -> str:
    """examples/<name>.yaml with top-level sections updated by `patch`."""
    doc = YAML(typ="safe").load((EXAMPLES / f"{name}.yaml").read_text(encoding="utf-8"))
    for section, values in patch.items():
        doc[section].update(values)
    path = tmp_path / f"{name}-variant.yaml"
    with path.open("w", encoding="utf-8") as handle:
        YAML(typ="safe").dump(doc, handle)
    return str(path)


def planned(path: str) -> Plan:
    """The plan `dpguard plan` renders for `path`, as data."""
    result = check_file(path, None, load_policies(), {}, plan_page=True)
    assert result.plan is not None
    return result.plan


def templates(tmp_path: Path, plan_md: str, rollback_md: str | None = None) -> str:
    folder = tmp_path / "templates"
    folder.mkdir(exist_ok=True)
    (folder / "plan.md.j2").write_text(plan_md, encoding="utf-8")
    if rollback_md is not None:
        (folder / "rollback.md.j2").write_text(rollback_md, encoding="utf-8")
    return str(folder)


# ---- plan.md.j2 branches ----------------------------------------------------------------------


def test_planned_with_the_dualpipe_replication_row(capsys):
    """frontier-moe at P = 32: the memory row breaks down the worst rank (rank 0) with its
    second copy, and the replication row prints that copy and the parameters of both."""
    code, out, _ = plan(capsys, FRONTIER)
    assert code == 0
    assert (
        "| Memory per GPU (worst rank) | 59.3 GiB (band 44.0-85.7) of 75.1 GiB usable (79.1 GiB "
        "less 5% headroom); rank 0: weights 2.77 + gradients 5.54 + optimizer 0.17 + second copy "
        "16.61 + activations 28.54 (33 in flight) + other 5.62 GiB (`dpguard memory` for every "
        "rank) |\n"
    ) in out
    assert (
        "| DualPipe replication | +16.6 GiB per GPU for the second parameter copy; fits. 3.72B "
        "parameters per GPU across both copies (0.55% of the model; experts sharded 64-way) |\n"
    ) in out
    assert (
        "| Expected bubble | **4.00%** (exact: simulated at a smaller M, extrapolated); "
        "1F1B at the same P and M: 11.44% |\n" in out
    )
    rows = {c.schedule: c for c in planned(FRONTIER).candidates}
    dual, plain = rows["dualpipe"].gpu_hours, rows["1f1b"].gpu_hours
    assert dual is not None and plain is not None
    saved = f"{plain - dual:,.0f}"
    assert f"| dualpipe (chosen) | 4.00% | {dual:,.0f} | {saved} saved | allowed |\n" in out
    assert f"| 1f1b | 11.44% | {plain:,.0f} | baseline | allowed |\n" in out


def test_planned_without_the_replication_row(capsys):
    """small-dense plans 1F1B: no replication row, no 1F1B comparison in the bubble row, and
    the table marks 1F1B as both chosen and the baseline."""
    code, out, _ = plan(capsys, SMALL)
    assert code == 0
    assert "DualPipe replication" not in out
    method = "exact: simulated at a smaller M, extrapolated"
    assert f"| Expected bubble | **3.03%** ({method}) |\n" in out
    rows = {c.schedule: c for c in planned(SMALL).candidates}
    ours, dual = rows["1f1b"].gpu_hours, rows["dualpipe"].gpu_hours
    assert ours is not None and dual is not None
    assert f"| GPU-hours for 1T tokens | {ours:,.0f} |\n" in out  # 1F1B: nothing to save against
    assert "| All-to-all kernel | none needed (no expert parallelism) |\n" in out
    assert f"| 1f1b (chosen) | 3.03% | {ours:,.0f} | baseline | allowed |\n" in out
    # The comparison says which schedules the policies would not allow at this P and M.
    assert (
        f"| dualpipe | 0.00% | {dual:,.0f} | {ours - dual:,.0f} saved | not allowed: HR001, "
        "RF001 |\n"
    ) in out


def test_no_pipeline_branch(capsys):
    code, out, _ = plan(capsys, str(EXAMPLES / "no-pipeline.yaml"))
    assert code == 0
    assert (
        "**Recommendation: no pipeline parallelism.** The whole training state fits one H100-SXM\n"
        "(39.2 GiB of 75.1 GiB usable), so pipeline stages would only add bubble.\n"
        "Train with data parallel 16 (micro-batch size 8,\n"
        "4 gradient-accumulation steps per optimizer step).\n"
    ) in out
    assert "| schedule | bubble |" not in out


def test_refused_branch(tmp_path, capsys):
    path = variant(tmp_path, "small-dense", {"training": {"tokens": "500M"}})
    code, out, _ = plan(capsys, path)
    assert code == 0
    assert (
        "**Pipeline planning refused** by RF003: 500,000,000 training tokens is under 1B: "
        "pipeline planning is refused; use data parallelism plus tensor parallelism\n"
        "\n"
        "**Recommended instead:** data parallelism plus tensor parallelism:\n"
        "tensor = 2, data parallel = 32 on 64 A100-80GB\n"
    ) in out
    assert "No bubble or GPU-hour comparison applies: there is no pipeline.\n" in out
    assert "| schedule | bubble |" not in out and "Expected bubble" not in out


def test_infeasible_branch(tmp_path, capsys):
    """405B dense on 8 A100-40GB: nothing fits at any P or T."""
    path = tmp_path / "impossible.yaml"
    path.write_text(IMPOSSIBLE, encoding="utf-8")
    code, out, err = plan(capsys, str(path))
    assert (code, err) == (1, "")
    head, _, rest = out.partition("\n\n")
    assert head == "# Pipeline plan: impossible"
    assert rest.startswith("**No feasible pipeline plan.**\n\n- 1f1b was not possible at any P")
    assert (
        "What would make it feasible: more memory per stage (full activation recompute, a larger "
        "tensor-parallel\nsize, or accelerators with more memory), or a larger global batch when "
        "the schedule needs more micro-batches.\n"
    ) in out
    assert out.endswith(
        "## Rollback trigger\nNo rollback trigger applies: there is no pipeline schedule to roll "
        "back.\n"
    )


def test_a_proposal_that_cannot_run_says_why(capsys):
    """large-dense proposes P = 16 with M = 16 and leaves the schedule to dpguard: DualPipeV
    needs M >= 2P = 32."""
    code, out, _ = plan(capsys, str(EXAMPLES / "large-dense.yaml"))
    assert code == 0
    assert (
        "- Your proposal (schedule left to dpguard, P = 16, M = 16): cannot run as dualpipev: "
        "dualpipev needs micro-batches >= 2 x ranks = 32 (got 16) [deepseek-ai/DualPipe "
        "dualpipev.py: num_chunks >= num_ranks * 2]\n"
    ) in out


# ---- rollback.md.j2 variants ------------------------------------------------------------------


def rollback_section(text: str) -> str:
    return text[text.index("## Rollback trigger") :]


def trigger(path: str, steps: int = 1000) -> str:
    """The paragraph's first lines, from the plan's own numbers (the metric and its arithmetic)."""
    p = planned(path)
    assert p.performance is not None
    m = p.manifest
    flops = perf.model_flops_per_token(sizing.architecture(m))
    peak = p.performance.model_tflops_per_gpu / p.performance.mfu
    return (
        "## Rollback trigger\n"
        f"Measure the **aggregate GPU utilization percentage over the first {steps} steps**, as "
        "model-FLOPs\nutilisation from the logged step time: "
        f"{m.training.global_batch_size * m.model.seq_len:,} tokens per step x {flops:.3g}\n"
        f"model FLOPs per token / (step time x {m.cluster.gpus:,} GPUs x {peak:,.0f} TFLOP/s "
        "peak). The plan\n"
        f"expects **{p.expected_utilization:.1f}%** (a {p.performance.step_time_s:.3g} s step). "
        'nvidia-smi\'s "GPU utilization" is not this\nnumber: it counts the time any kernel '
        "runs, so ranks waiting in NCCL or DeepEP kernels, or in the bubble, read as busy.\n"
    )


def test_rollback_to_a_simpler_schedule(capsys):
    _, out, _ = plan(capsys, FRONTIER)
    p = planned(FRONTIER)
    assert p.rollback_threshold is not None and p.rollback_performance is not None
    section = rollback_section(out)
    assert section.startswith(trigger(FRONTIER))
    assert (
        f"If it stays below **{p.rollback_threshold:.1f}%** (the low end of the model's "
        "calibrated band), dualpipe\nis not delivering what its complexity costs: switch to the "
        f"simpler **dualpipev**, expected at {100 * p.rollback_performance.mfu:.1f}%.\n"
    ) in section
    # the threshold is the band's low end below the expectation (policies/performance/model.yaml)
    assert p.rollback_threshold == pytest.approx(
        (1 + float(perf.data.load()["band"]["low"])) * p.expected_utilization
    )


def test_rollback_warns_when_the_simpler_schedule_is_expected_below_the_trigger(capsys):
    """large-dense: zb1p at P = M = 32; 1F1B at the same layout, with twice the bubble, is
    expected below zb1p's trigger."""
    _, out, _ = plan(capsys, str(EXAMPLES / "large-dense.yaml"))
    p = planned(str(EXAMPLES / "large-dense.yaml"))
    assert p.rollback_performance is not None and p.rollback_threshold is not None
    assert 100 * p.rollback_performance.mfu < p.rollback_threshold
    assert rollback_section(out).endswith(
        f"switch to the simpler **1f1b**, expected at {100 * p.rollback_performance.mfu:.1f}%.\n"
        "That is below the trigger itself: switch only once the shortfall is traced to zb1p "
        "(not to\ncommunication or stragglers, which 1f1b would suffer too).\n"
    )


def test_rollback_for_1f1b_which_has_no_simpler_schedule(capsys):
    _, out, _ = plan(capsys, SMALL)
    p = planned(SMALL)
    assert p.rollback_threshold is not None
    assert rollback_section(out) == trigger(SMALL) + (
        f"1f1b is already the simplest schedule, so if it stays below **{p.rollback_threshold:.1f}%"
        "** (the low\nend of the model's calibrated band) investigate stragglers, communication "
        "and data loading before changing the schedule.\n"
    )


@pytest.mark.parametrize(
    ("status", "reason"),
    [
        ("no-pipeline", "there is no pipeline schedule to roll back"),
        ("refused", "there is no pipeline schedule to roll back"),
        ("planned", "the step-time model could not price this layout"),
    ],
)
def test_no_rollback_trigger(status, reason):
    """Rendered directly: a planned status with no threshold cannot come out of the planner
    (it only accepts simulated schedules), but the template still covers it."""
    context = {"rollback_threshold": None, "status": status}
    text = _environment(None).get_template("rollback.md.j2").render(plan=context)
    assert text == f"## Rollback trigger\nNo rollback trigger applies: {reason}.\n"


def test_rollback_settings_come_from_the_layered_policy(tmp_path, capsys):
    """A team's set overrides the whole `rollback` block (settings layer key by key at the top
    level): 500 steps, and DualPipe rolls back straight to Zero Bubble."""
    policy = tmp_path / "team.yaml"
    policy.write_text(
        "apiVersion: dpguard/v1\nkind: PolicySet\n"
        "metadata: {name: team, version: 1.0.0}\n"
        "settings:\n"
        "  rollback:\n"
        "    steps: 500\n"
        "    simpler: {dualpipe: zb1p}\n"
        "rules: []\n",
        encoding="utf-8",
    )
    code, out, _ = plan(capsys, FRONTIER, "--policy", str(policy))
    assert code == 0
    section = rollback_section(out)
    assert section.startswith(trigger(FRONTIER, steps=500))
    assert "switch to the simpler **zb1p**, expected at " in section
    assert "team 1.0.0 (sha256:" in out


# ---- --templates DIR ----------------------------------------------------------------------------


def test_custom_templates_are_used(tmp_path, capsys):
    folder = templates(
        tmp_path,
        "{{ plan.name }}: {{ plan.schedule_title }} P={{ plan.pipeline }} M={{ plan.microbatches }}"
        " bubble {{ plan.chosen.bubble_pct }}\n{% include 'rollback.md.j2' %}",
        "trigger {{ plan.rollback_threshold_pct }} -> {{ plan.rollback_to }}\n",
    )
    code, out, err = plan(capsys, FRONTIER, "--templates", folder)
    threshold = planned(FRONTIER).rollback_threshold
    assert (code, out, err) == (
        0,
        f"frontier-moe: DualPipe P=32 M=240 bubble 4.00%\ntrigger {threshold:.1f}% -> dualpipev\n",
        "",
    )


def test_custom_templates_without_the_included_rollback_template(tmp_path, capsys):
    folder = templates(tmp_path, "{{ plan.name }}\n{% include 'rollback.md.j2' %}\n")
    code, out, err = plan(capsys, SMALL, "--templates", folder)
    assert (code, out) == (2, "")
    assert err == (
        f"dpguard: error: {folder}/plan.md.j2:2: template cannot be rendered: 'rollback.md.j2' "
        f"not found in search path: '{folder}'\n"
    )


def test_a_missing_templates_directory_exits_2(tmp_path, capsys):
    missing = str(tmp_path / "nowhere")
    code, out, err = plan(capsys, SMALL, "--templates", missing)
    assert (code, out, err) == (
        2,
        "",
        f"dpguard: error: {missing}: templates directory not found\n",
    )


def test_an_undefined_variable_exits_2_with_its_position(tmp_path, capsys):
    folder = templates(tmp_path, "line one\n{{ plan.name }}\nline three {{ plan.nosuch }}\n")
    code, out, err = plan(capsys, SMALL, "--templates", folder)
    assert (code, out) == (2, "")
    assert err == (
        f"dpguard: error: {folder}/plan.md.j2:3: template cannot be rendered: 'dict object' has "
        "no attribute 'nosuch'\n"
    )


def test_an_undefined_variable_in_the_included_template_points_there(tmp_path, capsys):
    folder = templates(
        tmp_path, "{{ plan.name }}\n{% include 'rollback.md.j2' %}\n", "## R\n\n{{ nope }}\n"
    )
    code, _, err = plan(capsys, SMALL, "--templates", folder)
    assert code == 2
    assert err == (
        f"dpguard: error: {folder}/rollback.md.j2:3: template cannot be rendered: 'nope' is "
        "undefined\n"
    )


def test_a_syntax_error_exits_2_with_its_position(tmp_path, capsys):
    folder = templates(tmp_path, "hello\n{% if %}\n{% endif %}\n")
    code, out, err = plan(capsys, SMALL, "--templates", folder)
    assert (code, out) == (2, "")
    assert err == (
        f"dpguard: error: {folder}/plan.md.j2:2: template cannot be rendered: Expected an "
        "expression, got 'end of statement block'\n"
    )


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "{{ ''.__class__.__mro__ }}",
            "access to attribute '__class__' of 'str' object is unsafe.",
        ),
        (
            "{{ cycler.__init__.__globals__.os }}",
            "access to attribute '__init__' of 'type' object is unsafe.",
        ),
        ("{{ plan.__class__ }}", "access to attribute '__class__' of 'dict' object is unsafe."),
        (
            "{{ range(10**9) | list | length }}",
            "OverflowError: Range too big. The sandbox blocks ranges larger than MAX_RANGE "
            "(100000).",
        ),
        ("{{ 1 / 0 }}", "ZeroDivisionError: division by zero"),
    ],
)
def test_the_sandbox_and_template_failures_exit_2_without_a_traceback(
    tmp_path, capsys, source, message
):
    folder = templates(tmp_path, f"x\n{source}\n")
    code, out, err = plan(capsys, SMALL, "--templates", folder)
    assert (code, out) == (2, "")
    assert err == f"dpguard: error: {folder}/plan.md.j2:2: template cannot be rendered: {message}\n"
    assert "Traceback" not in err


def test_json_output_does_not_use_templates(tmp_path, capsys):
    folder = templates(tmp_path, "{{ plan.nosuch }}\n")
    code, out, _ = plan(capsys, SMALL, "--templates", folder, "--format", "json")
    assert code == 0 and out.startswith("{\n")


@pytest.mark.parametrize(
    ("expression", "problem"),
    [
        ("'a' * 10**10", "repetition would make 10000000000 items (at most 100000)"),
        ("[0] * 200000", "repetition would make 200000 items (at most 100000)"),
        ("((10**1000)**1000)**1000", "3322-bit number to the power 1000 is too large"),
    ],
)
def test_templates_cannot_exhaust_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str, problem: str
) -> None:
    # A pull request can edit a repository's templates: the sandbox bounds what they build.
    (tmp_path / "plan.md.j2").write_text("{{ " + expression + " }}\n", encoding="utf-8")
    code = main(["plan", str(EXAMPLES / "small-dense.yaml"), "--templates", str(tmp_path)])
    assert code == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err


def test_bounded_operators_still_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "plan.md.j2").write_text("{{ 'ab' * 3 }} {{ 2 ** 10 }} {{ 1.5 ** 2 }}\n")
    assert main(["plan", str(EXAMPLES / "small-dense.yaml"), "--templates", str(tmp_path)]) == 0
    assert capsys.readouterr().out == "ababab 1024 2.25\n"


def test_the_shipped_templates_come_precompiled_and_current(tmp_path):
    """dpguard/compiled_templates holds Jinja's compilation of templates/*.j2 (no compile, no
    bytecode cache on a fresh runner). Rebuilt here with the installed Jinja: identical when
    that is the Jinja they were built with (DPGUARD_UPDATE_GOLDEN=1 rewrites them after a
    template change), and never used when it is not: the sources are compiled instead."""
    import os

    from jinja2 import ModuleLoader

    from dpguard.planner import render

    shipped = REPO / "dpguard" / "compiled_templates"
    if os.environ.get("DPGUARD_UPDATE_GOLDEN"):
        for old in shipped.glob("tmpl_*.py"):
            old.unlink()
        render.compile_templates(str(shipped))
    render.compile_templates(str(tmp_path))
    built = sorted(p.name for p in tmp_path.iterdir())
    same_jinja = (shipped / "BUILT").read_text().split("\n")[0] == (
        (tmp_path / "BUILT").read_text().split("\n")[0]
    )
    if same_jinja:
        assert sorted(p.name for p in shipped.iterdir() if p.name != "__init__.py") == built
        for name in built:
            assert (shipped / name).read_bytes() == (tmp_path / name).read_bytes(), (
                f"{name} is stale: DPGUARD_UPDATE_GOLDEN=1 pytest tests/test_plan_templates.py"
            )
    loader = render._environment(None).loader
    assert isinstance(loader, ModuleLoader) is same_jinja
