"""Command-line entry point: argparse, dispatch, and turning dpguard's errors into messages.

The exit-code table itself lives in `dpguard.exitcodes`; this module maps exceptions onto it.
"""

from __future__ import annotations

import argparse
import contextvars
import importlib
import sys
import traceback
from collections.abc import Sequence

from dpguard import __version__
from dpguard.errors import DpguardError
from dpguard.exitcodes import ExitCode, epilog

# Each name is a module in dpguard.commands exposing HELP, add_arguments(parser) and
# run(args) -> int. Command modules keep heavy imports inside run() so that `--help` and
# unrelated commands stay fast.
COMMANDS: tuple[str, ...] = (
    "review",
    "diff",
    "schema",
    "bubble",
    "compare",
    "test",
    "plan",
    "memory",
    "perf",
    "lint-policies",
    "rules",
    "explain",
    "facts",
)

EPILOG = epilog()  # the general table; each command's --help lists only its own codes


def _command(argv: Sequence[str]) -> str | None:
    """The command `argv` names (its first word that is not an option), if it is one."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line, or, for an `argv` that names a command, only that command's
    arguments: a hook run pays for importing and building one subparser, not thirteen (the
    others stay named, so the usage line and the choice check are the same)."""
    chosen = _command(argv) if argv is not None else None
    parser = argparse.ArgumentParser(
        prog="dpguard",
        description="Policy-as-code validator and planner for pipeline-parallel training.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"dpguard {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help="show the full traceback of an internal error"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMANDS:
        if chosen is not None and name != chosen:
            sub.add_parser(name)
            continue
        module = importlib.import_module(f"dpguard.commands.{name.replace('-', '_')}")
        cmd = sub.add_parser(
            name,
            help=module.HELP,
            description=module.HELP,
            epilog=epilog(name),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.add_arguments(cmd)
        # where every message asks for it: after the command too (main reads it from argv)
        cmd.add_argument(
            "--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS
        )
        cmd.set_defaults(run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:  # argparse: 0 for --help/--version, 2 for usage errors
            return int(exc.code or 0)
        # in a context of its own: what a command sets for its run (the team's framework
        # profiles, frameworks.profiles.activate) ends with it, also when main is called again
        return int(contextvars.copy_context().run(args.run, args))
    except DpguardError as exc:  # may quote a file's text: escaped for a CI log
        from dpguard.reporters.safe import diagnostic

        print(diagnostic(f"dpguard: error: {exc}"), file=sys.stderr)
        return ExitCode.CANNOT_RUN
    except KeyboardInterrupt:
        print("dpguard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return ExitCode.OK
    except OSError as exc:  # stdout on a full disk (`dpguard bubble > /dev/full`): not a bug
        from dpguard.reporters.output import drop_stdout

        drop_stdout()
        print(f"dpguard: error: cannot write the output: {exc.strerror or exc}", file=sys.stderr)
        return ExitCode.CANNOT_RUN
    except Exception as exc:
        from dpguard.reporters.safe import diagnostic

        if debug:
            traceback.print_exc()
        print(
            diagnostic(
                f"dpguard: internal error: {type(exc).__name__}: {exc} "
                "(this is a bug in dpguard; rerun with --debug for the traceback)"
            ),
            file=sys.stderr,
        )
        return ExitCode.INTERNAL
