"""Each subcommand's `--help` lists only the exit codes that command can return."""

from __future__ import annotations

import re

import pytest

from dpguard.cli import COMMANDS, main
from dpguard.exitcodes import COMMAND_CODES

# What each command can return beyond 0 (a result) and 3 (a bug): 1 only where something it
# judges can fail, 2 everywhere (argparse's usage errors at least).
CAN_FAIL = {"review", "diff", "test", "plan", "memory", "perf"}


def help_codes(capsys: pytest.CaptureFixture[str], command: str) -> dict[int, str]:
    assert main([command, "--help"]) == 0
    out = capsys.readouterr().out
    block = out.split("exit codes:\n", 1)[1]
    return {int(m[1]): m[2] for m in re.finditer(r"^  (\d)  (.+)$", block, re.M)}


def test_every_command_has_its_own_table() -> None:
    assert sorted(COMMAND_CODES) == sorted(COMMANDS)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_lists_only_the_commands_codes(
    capsys: pytest.CaptureFixture[str], command: str
) -> None:
    codes = help_codes(capsys, command)
    assert sorted(codes) == ([0, 1, 2, 3] if command in CAN_FAIL else [0, 2, 3])
    if command not in ("review", "diff"):
        assert not any("manifest passes" in meaning for meaning in codes.values())


def test_the_listed_meanings_are_the_commands(capsys: pytest.CaptureFixture[str]) -> None:
    assert help_codes(capsys, "review")[1].startswith("at least one manifest fails")
    assert help_codes(capsys, "test")[1].startswith("a case fails")
    assert help_codes(capsys, "plan")[1] == "the manifest is invalid, or no plan is feasible"
    assert help_codes(capsys, "schema") == {
        0: "the schema is printed",
        2: "dpguard cannot run as asked: usage error",
        3: "internal error (a bug; rerun with --debug for the traceback)",
    }


def test_a_command_without_1_in_its_table_does_not_return_it(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # lint-policies reports policy problems with 2, never 1; explain an unknown id with 2
    assert main(["explain", "NOPE001"]) == 2
    assert main(["lint-policies"]) == 0
    capsys.readouterr()


def test_the_top_level_help_keeps_the_general_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "exit codes:\n  0  every manifest passes\n  1  at least one manifest fails" in out
