"""`dpguard plan MANIFEST`: recommend a pipeline strategy and render the one-page plan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from dpguard.commands._policies import add_output_option, add_policy_option
from dpguard.frameworks.emit import EMIT_FORMATS

HELP = "recommend P, M and a schedule for a manifest and print the one-page plan"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="MANIFEST", help="the training manifest")
    parser.add_argument(
        "--format",
        choices=("markdown", "json", "yaml"),
        default="markdown",
        help="markdown (default): the one-page plan; json: its data; yaml: the parallelism "
        "section and training keys to paste into the manifest, with the warnings it keeps",
    )
    parser.add_argument(
        "--emit",
        choices=EMIT_FORMATS,
        default=None,
        help="print the plan as the framework's own arguments or config block instead (only "
        "the keys the plan decides; planned among the schedules that framework runs)",
    )
    add_policy_option(parser)
    parser.add_argument(
        "--templates", metavar="DIR", help="directory with your own plan.md.j2 and rollback.md.j2"
    )
    add_output_option(parser, "the plan")


def run(args: argparse.Namespace) -> int:
    from dpguard.check import check_file
    from dpguard.commands._policies import config_of, load
    from dpguard.exitcodes import ExitCode
    from dpguard.planner.render import plan_dict, render_markdown
    from dpguard.reporters.output import deliver
    from dpguard.reporters.safe import diagnostic, safe_line

    cfg = config_of(args, args.file)  # the same layered stack review judges this file with
    policies = load(args.policy, cfg)
    result = check_file(args.file, None, policies, cfg.defaults_for(args.file), plan_page=True)
    if result.manifest is None or result.outcome is None or result.plan is None:
        for finding in result.findings:
            print(diagnostic(finding.format()), file=sys.stderr)
        print(diagnostic(f"{args.file}: the manifest is invalid; nothing to plan"), file=sys.stderr)
        return ExitCode.FAILED
    plan = result.plan
    if args.emit:
        return _emit(plan, result.manifest, policies, args.emit, args.output)
    if args.format in ("json", "markdown"):
        from dpguard.planner.alternatives import with_alternatives

        plan = with_alternatives(plan)  # the pages that show the model's alternatives
    if args.format == "json":
        text = json.dumps(plan_dict(plan, policies), indent=2, sort_keys=True) + "\n"
    elif args.format == "yaml":
        from dpguard.planner.patch import render_yaml

        text = render_yaml(plan)
    else:  # the description is the manifest's free text: each line made safe for a CI log
        page = render_markdown(plan, policies, args.templates)
        text = "\n".join(safe_line(line) for line in page.split("\n"))
    deliver(text, args.output, "the plan")
    return ExitCode.FAILED if plan.status == "infeasible" else ExitCode.OK


def _emit(plan: Any, manifest: Any, policies: Any, fmt: str, output: str | None) -> int:
    from dpguard.exitcodes import ExitCode
    from dpguard.planner.emitted import emit_checked
    from dpguard.reporters.output import deliver

    notes: list[str] = []
    plan, text = emit_checked(plan, manifest, fmt, policies, notes)
    deliver(text, output, "the plan")
    refused = any(note.startswith(f"{fmt} refuses this at launch") for note in notes)
    return ExitCode.FAILED if plan.status == "infeasible" or refused else ExitCode.OK
