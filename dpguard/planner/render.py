"""Render a `Plan`: Markdown through Jinja templates, or the same numbers as plain data (JSON).

Templates run in a sandboxed environment with undefined names as errors; a platform team may
point `--templates DIR` at its own `plan.md.j2` / `rollback.md.j2`. A template that cannot be
loaded or rendered is dpguard's configuration being broken: ConfigError, exit 2.

Rendering only formats: every number comes from the plan as the planner finished it
(`planner.plan.with_page`: every schedule simulated and judged, the policies' verdict on the
plan's own layout, the rollback target's prediction). A plan without its page is a bug
(LookupError), not a reason to run the engine or the simulator here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cache
from typing import Any

from dpguard import perf, resources, sizing
from dpguard.confine import inside
from dpguard.errors import ConfigError
from dpguard.findings import finding_dict
from dpguard.manifest import format_quantity
from dpguard.memory import GIB
from dpguard.planner.alternatives import disagreement
from dpguard.planner.patch import kept_warnings, manifest_patch
from dpguard.planner.plan import Plan, ScheduleNumbers
from dpguard.policy.model import Policies, policy_line
from dpguard.policy.templates import PAGE, pct, sandbox, thousands

TITLES = {
    "gpipe": "GPipe",
    "1f1b": "1F1B",
    "interleaved-1f1b": "interleaved 1F1B",
    "zb1p": "Zero Bubble (ZB-H1)",
    "dualpipe": "DualPipe",
    "dualpipev": "DualPipeV",
}


def _gb(value: float) -> str:
    return f"{value / GIB:.1f}"


_METHODS = {
    "simulated": "exact simulation",
    "extrapolated": "exact: simulated at a smaller M, extrapolated",
    "closed form": "exact closed form",
}


def _candidate(
    c: ScheduleNumbers, baseline: ScheduleNumbers | None, rejects: tuple[str, ...] = ()
) -> dict[str, Any]:
    vs = "baseline" if c.schedule == "1f1b" else ""
    if vs == "" and c.gpu_hours is not None and baseline and baseline.gpu_hours is not None:
        delta = baseline.gpu_hours - c.gpu_hours
        vs = f"{thousands(abs(delta))} {'saved' if delta >= 0 else 'more'}"
    return {
        "schedule": c.schedule,
        "bubble": c.bubble,
        "bubble_pct": pct(c.bubble, 2),
        "gpu_hours": c.gpu_hours,
        "vs_1f1b": vs,
        "violations": "; ".join(c.violations),
        "method": _METHODS.get(c.method, c.method),
        "policy": ("not allowed: " + ", ".join(rejects)) if rejects else "allowed",
    }


def _memory_bytes(rank: Any) -> dict[str, int]:
    parts = ("weights", "gradients", "optimizer", "activations", "other", "total", "low", "high")
    out = {name: round(getattr(rank, name)) for name in parts}
    out["replication_extra"] = round(rank.replica)
    return out


def _brief(finding: Any) -> dict[str, str]:
    return {"code": finding.code, "severity": finding.severity.value, "message": finding.message}


def _proposal(plan: Plan) -> dict[str, Any] | None:
    """The strategy the manifest proposes, with the numbers the policies computed for it."""
    p, facts = plan.manifest.parallelism, plan.outcome.facts
    if p is None:
        return None
    bubble, hours = facts.get("proposal.bubble"), facts.get("proposal.gpu_hours")
    if plan.proposal_performance is not None:
        hours = plan.proposal_performance.gpu_hours
    memory = facts.get("proposal.stage_memory_gb")
    judged = facts.get("proposal.schedule")
    micro = plan.manifest.microbatches
    cannot_run = ""
    if bubble is None and judged not in (None, "none") and micro is not None:
        from dpguard.schedules import check

        virtual = p.virtual_stages if judged == "interleaved-1f1b" else 1
        cannot_run = "; ".join(check(judged, p.pipeline, micro, virtual))
    over = ""
    if not cannot_run and facts.get("proposal.memory_verdict") == "likely-oom":
        # ADV004's verdict in a few words: the page then leaves its finding out (`plan_context`)
        over = f", over the {facts['policy.usable_memory_gb']:.1f} GiB usable (ADV004)"
    return {
        "judged_as": judged or "",
        "cannot_run": cannot_run,
        "memory_over": over,
        "schedule": p.schedule or "schedule left to dpguard",
        "pipeline": p.pipeline,
        "microbatches": plan.manifest.microbatches,
        "bubble_pct": pct(bubble, 2),
        "gpu_hours": thousands(hours) if hours is not None else "n/a",
        "memory_gb": f"{memory:.1f}" if memory is not None else "n/a",
    }


def _timed(p: perf.Prediction | None) -> dict[str, Any] | None:
    """A prediction as the page prints it."""
    if p is None:
        return None
    lay = p.layout
    return {
        "schedule": lay.schedule,
        "layout": f"TP {lay.tensor}, PP {lay.pipeline}"
        + (f" (v {lay.virtual_stages})" if lay.virtual_stages > 1 else "")
        + (f", CP {lay.context}" if lay.context > 1 else "")
        + (f", EP {lay.expert}" if lay.expert > 1 else "")
        + f", DP {lay.data}, micro-batch {lay.micro_batch_size}, M {lay.microbatches}",
        "step_time": f"{p.step_time_s:.3g} s",
        "tokens_per_s": thousands(p.tokens_per_s_per_gpu),
        "band": f"{thousands(p.low)}-{thousands(p.high)}",
        "mfu": pct(p.mfu, 1),
        "gpu_hours": p.gpu_hours,
        "bubble": pct(p.bubble, 1),
    }


def _saved(plan: Plan) -> dict[str, Any] | None:
    """GPU-hours the plan saves, against the proposal, or without one against the best 1F1B
    layout (the plan's own when it is 1F1B); None when neither is priced."""
    ours = plan.performance
    if ours is None:
        return None
    if plan.proposal_performance is not None:
        return {
            "hours": plan.proposal_performance.gpu_hours - ours.gpu_hours,
            "against": "your proposal",
        }
    plain = [p for p in plan.alternatives if p.layout.schedule == "1f1b"]
    if plan.schedule == "1f1b" or not plain:
        return None
    return {"hours": plain[0].gpu_hours - ours.gpu_hours, "against": "the best 1F1B layout"}


def plan_context(plan: Plan, policies: Policies) -> dict[str, Any]:
    """Everything the templates may use, as plain data (also the basis of the JSON form)."""
    m = plan.manifest
    verdicts = plan.schedule_verdicts
    baseline = plan.numbers("1f1b")
    chosen = plan.numbers(plan.schedule)
    memory = plan.memory.worst if plan.memory else None
    settings = policies.settings
    refusal = next(iter(plan.outcome.redirects), None)
    refusal_finding = next(
        (f for f in plan.outcome.findings if refusal and f.code == refusal.id), None
    )
    target = settings["planner"]["microbatches_per_rank"]
    proposal = _proposal(plan)
    # the template prints the proposal's line unless the plan is refused
    folded = bool(proposal and proposal["memory_over"]) and plan.status != "refused"
    # Routed experts are split over EP x ETP (sizing.etp: the plan's, else the framework's).
    expert_tensor = sizing.etp(plan.manifest, plan.strategy) if plan.strategy is not None else 1
    expert_shards = plan.expert * expert_tensor
    params = memory.parameters if memory else 0
    return {
        "name": m.name,
        "description": m.description or "",
        "status": plan.status,
        "schedule": plan.schedule,
        "schedule_title": TITLES.get(plan.schedule or "", plan.schedule),
        "gpus": m.cluster.gpus,
        "accelerator": m.cluster.accelerator,
        "memory_gb": f"{m.cluster.memory_gb:g}",
        "usable_gib": f"{m.cluster.usable_gib:g}",
        "headroom_pct": f"{float(settings['memory_headroom']):.0%}",
        "tokens": format_quantity(m.training.tokens),
        "ideal_gpu_hours": plan.ideal_gpu_hours,
        "seq_len": m.model.seq_len,
        "global_batch": m.training.global_batch_size,
        "tensor": plan.tensor,
        "pipeline": plan.pipeline,
        "expert": plan.expert,
        "expert_tensor": expert_tensor,
        "expert_shards": expert_shards,
        "context": plan.context,
        "data_parallel": plan.data_parallel,
        "zero_stage": m.training.zero_stage,
        "unpipelined": plan.unpipelined,
        "microbatches": plan.microbatches,
        "micro_batch_size": plan.micro_batch_size,
        "mbs_chosen": ("training", "micro_batch_size") not in m.source.keys,
        "mbs_by_model": _by_model(plan),
        "mp_range": "{min:g}..{max:g}".format(**target),
        "m_over_p": f"{plan.microbatches / plan.pipeline:.2f}" if plan.pipeline else "n/a",
        "m_over_p_in_range": bool(plan.pipeline)
        and target["min"] <= plan.microbatches / plan.pipeline <= target["max"],
        "memory": _memory(plan),
        "params_per_gpu": f"{params / 1e9:.2f}B",
        "param_density": f"{params / m.model.total_params:.2%}" if params else "n/a",
        "kernel": {"kernel": plan.kernel.kernel, "requires": plan.kernel.requires},
        "chosen": _candidate(chosen, baseline) if chosen else None,
        "baseline": _candidate(baseline, baseline)
        if baseline and plan.schedule != "1f1b"
        else None,
        "saved_vs_1f1b": (baseline.gpu_hours - chosen.gpu_hours)
        if baseline and chosen and baseline.gpu_hours is not None and chosen.gpu_hours is not None
        else 0,
        "candidates": [
            _candidate(c, baseline, verdicts.get(c.schedule, ())) for c in plan.candidates
        ],
        "verdicts": {name: list(ids) for name, ids in verdicts.items()},
        "refusal": {
            "id": refusal.id if refusal else "",
            "message": refusal_finding.message if refusal_finding else "",
        },
        "decision": {
            "id": plan.outcome.decision.id if plan.outcome.decision else "",
            "title": plan.outcome.decision.title if plan.outcome.decision else "",
        },
        "redirects": [{"id": r.id, "title": r.title} for r in plan.outcome.redirects],
        "proposal": proposal,
        # ADV004 is said on the proposal's line when that line prints (the plan is the fix;
        # `dpguard review` prints the finding with its remedies): a page stays one page
        "findings": [
            _brief(f) for f in plan.outcome.findings if not (folded and f.code == "ADV004")
        ],
        "plan_findings": [_brief(f) for f in plan.plan_findings],
        "kept_warnings": [dict(k._asdict()) for k in kept_warnings(plan)],
        "notes": [*plan.notes, *filter(None, [disagreement(plan)])],
        "performance": _timed(plan.performance),
        # a pipeline-free alternative is ZeRO-3 (planner.alternatives)
        "alternatives": [
            {**timed, "schedule": "none (ZeRO-3)"} if timed["schedule"] == "none" else timed
            for timed in filter(None, map(_timed, plan.alternatives))
        ],
        "saved": _saved(plan),
        "mfu_definition": _mfu_definition(plan),
        "assumptions": _assumptions(plan, settings),
        "policies": policy_line(policies).removeprefix("policies: "),
        **_rollback(plan, settings),
    }


def _by_model(plan: Plan) -> dict[str, str] | None:
    """The M/P target's micro-batch size and how much slower the step-time model prices it,
    when the model chose a smaller size (None: the target's choice stands)."""
    target, perf = plan.micro_batch_target, plan.performance
    if target is None or perf is None:
        return None
    size, seconds = target
    return {"size": f"{size:,}", "slower": f"{seconds / perf.step_time_s - 1:.1%}"}


def _memory(plan: Plan) -> dict[str, Any]:
    """The worst rank's memory as the page prints it ("n/a" without a layout)."""
    memory = plan.memory.worst if plan.memory else None
    return {
        "total_gb": _gb(memory.total) if memory else "n/a",
        "low_gb": _gb(memory.low) if memory else "n/a",
        "high_gb": _gb(memory.high) if memory else "n/a",
        "activations_gb": _gb(memory.activations) if memory else "n/a",
        "replication_gb": _gb(memory.replica) if memory else "n/a",
        "limit_gb": f"{plan.memory_limit_gb:.1f}",
        "worst": memory.gib() if memory else None,
    }


def _assumptions(plan: Plan, settings: Mapping[str, Any]) -> list[str]:
    """What the plan's numbers assume: the compute, the op times fed to the simulator, the
    memory model's own assumptions."""
    m = plan.manifest
    assumptions = [
        f"compute: 6 x {thousands(m.model.active_params)} active parameters x "
        f"{format_quantity(m.training.tokens)} tokens at {m.cluster.peak_tflops_bf16:g} TFLOP/s "
        f"dense BF16 peak x {plan.efficiency:.0%} "
        f"non-bubble efficiency = {thousands(plan.ideal_gpu_hours)} GPU-hours with no bubble"
        + (
            " (the bubble simulations' op times; step time, GPU-hours and MFU come from the "
            "step-time model)"
            if plan.performance is not None and plan.op_times
            else ""
        ),
    ]
    if plan.op_times:
        ratios = settings["op_time_ratios"]
        ms = {k: f"{v * 1000:.2f} ms" for k, v in plan.op_times.items()}
        assumptions.append(
            f"op times per stage chunk: F {ms['forward']}, B {ms['backward']}, W {ms['weight']}, "
            f"F&B {ms['overlapped']} (B/F = {ratios['backward']:g}, W/F = {ratios['weight']:g}, "
            f"F&B/F = {ratios['overlapped']:g}; no communication time modelled)"
        )
    if plan.memory is not None:
        assumptions += list(plan.memory.assumptions)
    return assumptions


def _rollback(plan: Plan, settings: Mapping[str, Any]) -> dict[str, Any]:
    """The rollback paragraph's numbers."""
    return {
        "rollback_steps": settings["rollback"]["steps"],
        "rollback_to": plan.rollback_to,
        "rollback_threshold": plan.rollback_threshold,
        "rollback_threshold_pct": f"{plan.rollback_threshold:.1f}%"
        if plan.rollback_threshold is not None
        else "n/a",
        "expected_utilization": f"{plan.expected_utilization:.1f}%"
        if plan.expected_utilization is not None
        else "n/a",
        "fallback_utilization": pct(plan.rollback_performance.mfu, 1)
        if plan.rollback_performance
        else "n/a",
        # The simpler schedule is expected below the trigger itself: switching is not a remedy
        # for a shortfall that is not the complex schedule's own.
        "fallback_below_threshold": bool(
            plan.rollback_performance
            and plan.rollback_threshold is not None
            and 100 * plan.rollback_performance.mfu < plan.rollback_threshold
        ),
    }


def _mfu_definition(plan: Plan) -> dict[str, str] | None:
    """The arithmetic that turns a logged step time into the rollback metric (MFU)."""
    p = plan.performance
    if p is None:
        return None
    m = plan.manifest
    peak = p.model_tflops_per_gpu / p.mfu if p.mfu else m.cluster.peak_tflops_bf16
    flops = perf.model_flops_per_token(sizing.architecture(m))
    return {
        "tokens_per_step": thousands(m.training.global_batch_size * m.model.seq_len),
        "flops_per_token": f"{flops:.3g}",
        "gpus": thousands(m.cluster.gpus),
        "peak_tflops": f"{peak:,.0f}",
        "step_time": f"{p.step_time_s:.3g}",
    }


COMPILED = "dpguard.compiled_templates"


def _confined_loader() -> Any:
    from jinja2 import FileSystemLoader, TemplateNotFound

    class Confined(FileSystemLoader):
        """A team's `--templates` directory, whose templates (and what they include) are read
        only from inside it, symbolic links resolved: a committed link to ~/.ssh/id_rsa or
        /etc/passwd is not a template (Jinja's own loader refuses `..` but follows links)."""

        def get_source(self, environment: Any, template: str) -> Any:
            from jinja2.loaders import split_template_path

            # checked before a byte is read (Jinja's loader reads only regular files)
            root = self.searchpath[0]
            if not inside(os.path.join(root, *split_template_path(template)), root):
                raise TemplateNotFound(f"{template} (it leads outside {self.searchpath[0]})")
            return super().get_source(environment, template)

    return Confined


def _environment(templates_dir: str | None) -> Any:
    """The shipped templates precompiled (dpguard.compiled_templates) when they were built by
    this Jinja from these very templates, else compiled here; a team's own `--templates` are
    compiled here on every run. No bytecode cache: Jinja would unmarshal and run whatever it
    finds in the cache directory, so whoever can write there would run code."""

    if templates_dir is None:
        return _shipped_environment()
    loader = _confined_loader()(templates_dir)
    return sandbox(PAGE, loader=loader, keep_trailing_newline=True)


@cache
def _shipped_environment() -> Any:
    """Once per process: the Markdown review renders a page per file, and the stamp check reads
    every template."""
    from jinja2 import ModuleLoader, PackageLoader

    built = resources.packaged(COMPILED)
    stamp = built.joinpath("BUILT")
    if stamp.is_file() and stamp.read_text(encoding="utf-8") == _built_stamp():
        return sandbox(PAGE, loader=ModuleLoader(str(built)), keep_trailing_newline=True)
    return sandbox(PAGE, loader=PackageLoader("dpguard.templates", ""), keep_trailing_newline=True)


def _built_stamp() -> str:
    """The Jinja version and the digest of the shipped templates and of the sandbox that
    compiles them (policy/templates.py and policy/sandbox.py: its code generator meters the
    compiled code) that the compiled ones must match: a changed sandbox compiles them again,
    never runs them unmetered."""
    import hashlib
    import inspect

    import jinja2

    from dpguard.policy import sandbox, templates

    digest = hashlib.sha256(inspect.getsource(templates).encode())
    digest.update(inspect.getsource(sandbox).encode())
    for name in sorted(_template_names()):
        digest.update(
            name.encode() + b"\0" + resources.read_text("dpguard.templates", name).encode()
        )
    return f"jinja2 {jinja2.__version__}\n{digest.hexdigest()}\n"


def _template_names() -> list[str]:
    return [
        e.name for e in resources.packaged("dpguard.templates").iterdir() if e.name.endswith(".j2")
    ]


def compile_templates(target: str) -> None:
    """Compile the shipped templates into `target` (dpguard/compiled_templates) with their stamp."""
    from jinja2 import PackageLoader

    env = sandbox(PAGE, loader=PackageLoader("dpguard.templates", ""), keep_trailing_newline=True)
    env.compile_templates(target, zip=None, filter_func=lambda name: name.endswith(".j2"))
    with open(os.path.join(target, "BUILT"), "w", encoding="utf-8") as stamp:
        stamp.write(_built_stamp())


def _position(exc: BaseException) -> str:
    """file:line of a template error. Syntax errors carry it; errors raised while rendering
    (an undefined name, the sandbox refusing an attribute) only through the traceback frames
    Jinja rewrites to point into the template, the innermost of which is the culprit."""
    where, line = getattr(exc, "filename", None), getattr(exc, "lineno", None)
    if line is None:
        tb = exc.__traceback__
        while tb is not None:
            name = tb.tb_frame.f_code.co_filename
            if not name.endswith(".py") and not name.startswith("<"):
                where, line = name, tb.tb_lineno
            tb = tb.tb_next
    where = where or "plan.md.j2"
    return f"{where}:{line}" if line else where


def render_markdown(plan: Plan, policies: Policies, templates_dir: str | None = None) -> str:
    from jinja2 import TemplateError

    if templates_dir is not None and not os.path.isdir(templates_dir):
        raise ConfigError("templates directory not found", templates_dir)
    context = plan_context(plan, policies)  # outside the try: a failure here is dpguard's bug
    try:
        template = _environment(templates_dir).get_template("plan.md.j2")
        text = template.render(plan=context)
    except Exception as exc:
        # Anything a template raises is the template's fault: TemplateError (syntax, undefined
        # name, the sandbox refusing an attribute or a template past its budget of work or
        # output, policy.templates.PAGE) and what its expressions raise themselves, e.g.
        # {{ 1 / 0 }} or a range over the sandbox's limit.
        detail = str(exc) if isinstance(exc, TemplateError) else f"{type(exc).__name__}: {exc}"
        raise ConfigError(f"template cannot be rendered: {detail}", _position(exc)) from None
    # Collapse the blank-line runs Jinja's block tags leave, so the page stays compact.
    lines: list[str] = []
    for line in text.splitlines():
        if line.startswith("#") and lines and lines[-1].strip():
            lines.append("")  # a heading always follows a blank line
        if line.strip() or (lines and lines[-1].strip()):
            lines.append(line.rstrip())
    return "\n".join(lines).strip() + "\n"


def plan_dict(plan: Plan, policies: Policies) -> dict[str, Any]:
    """The plan as data: every number, the op times fed to the calculator, every assumption."""
    context = plan_context(plan, policies)
    return {
        "name": context["name"],
        "status": plan.status,
        "schedule": plan.schedule,
        "tensor": plan.tensor,
        "pipeline": plan.pipeline,
        "expert": plan.expert,
        "context": plan.context,
        "data_parallel": plan.data_parallel,
        "microbatches": plan.microbatches,
        "micro_batch_size": plan.micro_batch_size,
        "op_times_seconds": dict(plan.op_times),
        "op_time_ratios": dict(policies.settings["op_time_ratios"]),
        "efficiency": plan.efficiency,
        "ideal_gpu_hours": plan.ideal_gpu_hours,
        "candidates": [
            {
                "schedule": c.schedule,
                "bubble_fraction": c.bubble,
                "gpu_hours": c.gpu_hours,
                "makespan_forward_chunks": c.makespan_chunks,
                "violations": list(c.violations),
                "method": c.method,
                "policy_rejects": context["verdicts"].get(c.schedule, []),
                "virtual_stages": c.virtual_stages,
            }
            for c in plan.candidates
        ],
        "memory_bytes": None if plan.memory is None else _memory_bytes(plan.memory.worst),
        "training_changes": list(plan.training_changes),
        "memory_worst_rank": None if plan.memory is None else plan.memory.worst.gib(),
        "memory_limit_gib": plan.memory_limit_gb,
        "kernel": {
            "kernel": plan.kernel.kernel,
            "requires": plan.kernel.requires,
            "source": plan.kernel.source,
        },
        "performance": plan.performance.as_dict() if plan.performance else None,
        "proposal_performance": plan.proposal_performance.as_dict()
        if plan.proposal_performance
        else None,
        "alternatives": [p.as_dict() for p in plan.alternatives],
        "rollback": {
            "metric": "model-FLOPs utilisation from the logged step time (docs/planner.md)",
            "to": plan.rollback_to,
            "threshold_percent": plan.rollback_threshold,
            "expected_utilization_percent": plan.expected_utilization,
            "steps": policies.settings["rollback"]["steps"],
        },
        "findings": [finding_dict(f) for f in plan.outcome.findings],
        "plan_findings": [finding_dict(f) for f in plan.plan_findings],
        "patch": manifest_patch(plan),
        "kept_warnings": context["kept_warnings"],
        "notes": list(plan.notes),
        "assumptions": context["assumptions"],
        "policies": [
            {"name": s.name, "version": s.version, "digest": s.digest} for s in policies.sets
        ],
    }
