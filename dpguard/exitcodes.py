"""The one place that decides dpguard's exit code.

0  every manifest passes
1  at least one manifest fails (unparseable, schema or cross-field errors, blocking findings)
2  dpguard cannot run as asked (usage, missing file, its own policy/schema/template broken)
3  internal error (a bug)
"""

from __future__ import annotations

from enum import IntEnum

from dpguard.findings import Finding, Severity


class ExitCode(IntEnum):
    OK = 0
    FAILED = 1
    CANNOT_RUN = 2
    INTERNAL = 3


# `never`: an advisory rollout, whose findings are reported but block nothing (exit 2 and 3
# still say that dpguard could not run)
FAIL_ON = {
    "error": (Severity.ERROR,),
    "warning": (Severity.ERROR, Severity.WARNING),
    "never": (),
}

_CANNOT_RUN = "dpguard cannot run as asked: usage error"
_INTERNAL = (ExitCode.INTERNAL, "internal error (a bug; rerun with --debug for the traceback)")
# The general table (`dpguard --help`), which is also review's.
GENERAL = (
    (ExitCode.OK, "every manifest passes"),
    (ExitCode.FAILED, "at least one manifest fails"),
    (
        ExitCode.CANNOT_RUN,
        "dpguard cannot run as asked (usage, missing file, broken policy/schema/template)",
    ),
    _INTERNAL,
)
# What each command's exit codes mean, for its --help: only the codes it can return (every
# command can end with 2 on a usage error and 3 on a bug). A command missing here gets the
# general table; tests/test_help_exit_codes.py keeps every command listed.
COMMAND_CODES: dict[str, tuple[tuple[int, str], ...]] = {
    "review": GENERAL,
    "diff": (
        (ExitCode.OK, "every manifest passes after the change"),
        (ExitCode.FAILED, "at least one manifest fails after the change"),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, an unreadable file or revision, a broken policy"),
        _INTERNAL,
    ),
    "schema": (
        (ExitCode.OK, "the schema is printed"),
        (ExitCode.CANNOT_RUN, _CANNOT_RUN),
        _INTERNAL,
    ),
    "bubble": (
        (ExitCode.OK, "the schedule is simulated"),
        (
            ExitCode.CANNOT_RUN,
            f"{_CANNOT_RUN}, parameters the schedule cannot run, an unwritable --svg",
        ),
        _INTERNAL,
    ),
    "compare": (
        (ExitCode.OK, "the schedules are compared"),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, invalid ranks, micro-batches or op times"),
        _INTERNAL,
    ),
    "test": (
        (ExitCode.OK, "every case passes (and every rule is covered, when coverage is required)"),
        (
            ExitCode.FAILED,
            "a case fails, or a rule lacks a case (--require-coverage, --coverage-of)",
        ),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, a broken test file, policy, config or waivers file"),
        _INTERNAL,
    ),
    "plan": (
        (ExitCode.OK, "a feasible plan is printed"),
        (ExitCode.FAILED, "the manifest is invalid, or no plan is feasible"),
        (
            ExitCode.CANNOT_RUN,
            f"{_CANNOT_RUN}, a missing file, a broken policy or template, an unwritable --output",
        ),
        _INTERNAL,
    ),
    "memory": (
        (ExitCode.OK, "the layout is sized and is not a certain out-of-memory"),
        (ExitCode.FAILED, "the manifest is invalid, there is nothing to size, or it cannot fit"),
        (
            ExitCode.CANNOT_RUN,
            f"{_CANNOT_RUN}, a missing file, a broken policy, an unwritable --output",
        ),
        _INTERNAL,
    ),
    "perf": (
        (ExitCode.OK, "the layout is timed"),
        (
            ExitCode.FAILED,
            "the manifest is invalid, there is nothing to time, or a custom accelerator lacks "
            "a number the model needs",
        ),
        (
            ExitCode.CANNOT_RUN,
            f"{_CANNOT_RUN}, a missing file, a broken policy or performance data, an unwritable "
            "--output",
        ),
        _INTERNAL,
    ),
    "lint-policies": (
        (ExitCode.OK, "the policy stack loads (warnings do not change this)"),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, or a policy problem (each is printed)"),
        _INTERNAL,
    ),
    "rules": (
        (ExitCode.OK, "the rules are listed"),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, a broken policy or config"),
        _INTERNAL,
    ),
    "explain": (
        (ExitCode.OK, "the rule or code is explained"),
        (ExitCode.CANNOT_RUN, f"{_CANNOT_RUN}, an unknown id, a broken policy or config"),
        _INTERNAL,
    ),
    "facts": ((ExitCode.OK, "the facts are listed"), (ExitCode.CANNOT_RUN, _CANNOT_RUN), _INTERNAL),
}


def epilog(command: str | None = None) -> str:
    """The ``exit codes:`` block of `--help`: the command's own, or the general table."""
    rows = COMMAND_CODES.get(command, GENERAL) if command else GENERAL
    return "exit codes:\n" + "".join(f"  {int(code)}  {meaning}\n" for code, meaning in rows)


def blocking(finding: Finding, fail_on: str = "error") -> bool:
    return not finding.waived and finding.severity in FAIL_ON[fail_on]
