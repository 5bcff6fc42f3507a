"""The few exception types dpguard raises for expected failures.

Problems *in a manifest* are values (`dpguard.findings.Finding`), never exceptions, so one broken
manifest cannot stop the others from being checked. The exceptions here mean that dpguard cannot
run as asked; `dpguard.cli` turns each into one message and an exit code.
"""

from __future__ import annotations


class DpguardError(Exception):
    """Base of every expected failure; the CLI prints its message and exits 2."""


class UsageError(DpguardError):
    """The command line asks for something that cannot be done (bad option values)."""


class InputError(DpguardError):
    """A path given on the command line is missing, a directory, or unreadable."""


class ConfigError(DpguardError):
    """dpguard's own configuration is broken: a policy, schema, template or data file.

    `location` is ``path:line:col`` when the problem has a position.
    """

    def __init__(self, message: str, location: str | None = None) -> None:
        self.location = location
        super().__init__(f"{location}: {message}" if location else message)


class ScheduleError(DpguardError):
    """Schedule parameters that violate a schedule's constraints (one message per violation)."""

    def __init__(self, violations: list[str] | tuple[str, ...]) -> None:
        self.violations = tuple(violations)
        super().__init__("; ".join(self.violations))


class DeadlockError(ScheduleError):
    """A generated order that can never finish: a bug in a schedule generator, not user input."""
