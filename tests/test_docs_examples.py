"""The docs against the tool: every `$ dpguard ...` line of a `console` block in README.md and
docs/*.md whose files exist is run, must be accepted (exit 0 or 1: options and files as
documented), and the output printed under it in the block must be what dpguard prints now.

Output in a block may elide: a line that is only `...` (indented or not) stands for any number
of lines, and `...` inside a line for any text there. Commands on placeholder files
(`run.yaml`, `team.yaml`, `[PATH...]`) are not run; their options are checked by --help."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
FILE_ARG = re.compile(r"\.(ya?ml|toml|json|sh)$|/")


@dataclass(frozen=True)
class Example:
    doc: str
    line: int
    argv: tuple[str, ...]
    output: tuple[str, ...]

    @property
    def id(self) -> str:
        return f"{self.doc}:{self.line}"


def examples() -> list[Example]:
    out: list[Example] = []
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        for block in re.finditer(r"^```console\n(.*?)^```$", text, re.M | re.S):
            first = text.count("\n", 0, block.start(1)) + 1
            lines = block[1].splitlines()
            starts = [i for i, line in enumerate(lines) if line.startswith("$ dpguard")]
            for n, i in enumerate(starts):
                end = starts[n + 1] if n + 1 < len(starts) else len(lines)
                command = lines[i][2:].split("  #", 1)[0]
                out.append(
                    Example(
                        doc.relative_to(REPO).as_posix(),
                        first + i,
                        tuple(shlex.split(command, comments=True)),
                        tuple(lines[i + 1 : end]),
                    )
                )
    return out


EXAMPLES = examples()


def _runnable(example: Example) -> bool:
    """Whether every file the command names exists in this checkout (placeholders do not)."""
    args = example.argv[1:]
    if any(a.startswith("[") for a in args):
        return False
    return all((REPO / a).exists() for a in args if FILE_ARG.search(a) and not a.startswith("-"))


def _dpguard() -> str:
    found = shutil.which("dpguard", path=str(Path(sys.executable).parent)) or shutil.which(
        "dpguard"
    )
    assert found, "dpguard is not installed next to the running Python"
    return found


def matches(expected: tuple[str, ...], actual: list[str]) -> bool:
    """`actual` against the documented lines, with `...` elisions (module docstring)."""
    if not expected:
        return True
    head, rest = expected[0], expected[1:]
    if head.strip() == "...":
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    if not actual:
        return False
    pattern = ".*".join(re.escape(part) for part in head.split("..."))
    return re.fullmatch(pattern, actual[0].rstrip()) is not None and matches(rest, actual[1:])


def test_the_docs_have_examples_to_check() -> None:
    assert sum(1 for e in EXAMPLES if _runnable(e)) >= 10
    assert any(e.output for e in EXAMPLES if _runnable(e))


@pytest.mark.parametrize("example", EXAMPLES, ids=[e.id for e in EXAMPLES])
def test_documented_command(example: Example, tmp_path: Path) -> None:
    assert example.argv[0] == "dpguard"
    if not _runnable(example):
        # the subcommand and every option it names exist
        sub = example.argv[1]
        helped = subprocess.run(
            [_dpguard(), sub, "--help"], capture_output=True, text=True, timeout=60
        )
        assert helped.returncode == 0, f"{example.id}: no subcommand {sub}"
        for option in re.findall(r"(?<![\w-])(--[\w-]+)", " ".join(example.argv[2:])):
            assert option in helped.stdout, f"{example.id}: {sub} has no option {option}"
        return
    # run where the examples are, in a copy: commands that write files write there
    shutil.copytree(REPO / "examples", tmp_path / "examples")
    done = subprocess.run(
        [_dpguard(), *example.argv[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode in (0, 1), f"{example.id}: exit {done.returncode}\n{done.stderr}"
    if example.output:
        actual = done.stdout.splitlines()
        assert matches(example.output, actual), (
            f"{example.id}: the documented output is not what dpguard prints:\n"
            + "\n".join(example.output)
            + "\n---- dpguard prints ----\n"
            + done.stdout
        )


def test_documented_rule_counts() -> None:
    """`N policy sets, M rules: ok`, wherever the docs quote lint-policies' answer."""
    done = subprocess.run(
        [_dpguard(), "lint-policies"], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    actual = done.stdout.strip()
    for doc in DOCS:
        for quoted in re.findall(r"\d+ policy sets, \d+ rules: ok", doc.read_text("utf-8")):
            assert quoted == actual, f"{doc.name} quotes `{quoted}`; lint-policies says `{actual}`"


def test_no_internal_references_in_the_docs() -> None:
    """The docs are for users: no pointers to this project's issue tracker numbers."""
    for doc in [*DOCS, REPO / "BENCHMARKS.md", REPO / "examples" / "team-repo" / ".dpguard.yaml"]:
        text = doc.read_text(encoding="utf-8")
        assert not re.search(r"\b[Ii]ssue \d+\b", text), doc.name


def test_readme_rule_ranges_are_the_shipped_rules() -> None:
    """README's `HR001-HR014`-style ranges name exactly the ids policies/core.yaml ships."""
    import yaml

    core = yaml.safe_load((REPO / "policies" / "core.yaml").read_text(encoding="utf-8"))
    ids = [rule["id"] for rule in core["rules"]]
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    ranges = re.findall(r"\b([A-Z]+)(\d{3})-\1(\d{3})\b", readme)
    assert {prefix for prefix, _, _ in ranges} == {re.sub(r"\d+", "", i) for i in ids}
    for prefix, low, high in ranges:
        numbers = sorted(int(i[len(prefix) :]) for i in ids if re.fullmatch(prefix + r"\d+", i))
        assert (int(low), int(high)) == (numbers[0], numbers[-1]), prefix
