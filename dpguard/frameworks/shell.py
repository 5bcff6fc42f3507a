"""Read the arguments of a launch command out of a shell script, without running it.

Megatron-LM runs are launched by bash scripts: ``torchrun ... pretrain_gpt.py ${GPT_ARGS[@]}``
with the flags in arrays or strings, continued lines, and ``VAR=${VAR:-default}`` variables.
This module follows what a static reader can follow exactly, in file order: literal words,
quotes, line continuations, assignments (plain, ``export``, ``declare``/``local``/``readonly``),
arrays and ``+=``, ``${VAR}``, ``${VAR:-default}``/``${VAR-default}``/``${VAR:=default}``,
``${ARR[@]}``, integer arithmetic ``$((...))`` over values it knows, and ``if``/``elif``/``else``
branches whose test compares values it knows (``[[ "$DTYPE" == "fp8" ]]``, ``[ "$N" -gt 1 ]``,
``-z``/``-n``): a branch that runs is read as written, one that cannot run is skipped. Everything
else (command substitution, a variable the file never sets, a value assigned inside a branch
whose test is not known or inside ``for``/``while``/``case``, a sourced file) makes the affected
words *unknown*, never guessed: each unknown word carries the reason, and the caller reports it
at its position. A variable the script never assigns is its caller's environment: unknown, or
its ``${VAR:-default}``, unless `parse` is given that environment. ``NAME=value cmd`` sets NAME
in cmd's environment only, as bash does. Here-document bodies are data, skipped; CRLF line
ends read as LF.

Every word keeps the position where its text was written, so a flag that comes from an array
defined on line 12 and expanded on line 40 is reported on line 12.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from dpguard.frameworks.numbers import whole
from dpguard.yamlevents import Position


class ShellError(Exception):
    """The script cannot be tokenised (an unterminated quote or substitution)."""

    def __init__(self, message: str, position: Position) -> None:
        super().__init__(message)
        self.message = message
        self.position = position


# Budgets: what a real launch script needs many times over, and a pathological one (self-doubling
# assignments, defaults nested hundreds deep, thousand-term arithmetic) exceeds at once. Each is
# an error naming the limit at the script's position (ShellError), never gigabytes or a stack
# overflow.
MAX_NESTING = 16  # ${A:-${B:-...}} levels
MAX_EXPANSION = 1_000_000  # characters + words all expansions produce, per script
MAX_ARITHMETIC = 256  # characters of one $((...)) expression

UNKNOWN = "\0"  # stands for an unknown part inside a partly known word (never in a script)


@dataclass(frozen=True)
class Word:
    """One word after expansion. `text` is None when its value cannot be known statically;
    `why` then says why (for the reader's note)."""

    text: str | None
    position: Position
    why: str = ""
    # (offset in text, position in the file) where each written piece of `text` starts: a
    # string split later into words gives each word the place it was written
    spans: tuple[tuple[int, Position], ...] = ()
    # An unknown word's text with UNKNOWN in place of each part that cannot be known, so that
    # a string such as OPTIONS="--tp 4 --mbs ${BZ}" still splits into the words it knows
    partial: str | None = None
    unknowns: tuple[str, ...] = ()  # why, for each UNKNOWN in partial in order

    def pieces(self) -> Iterator[Word]:
        """The blank-separated words of `text` (or of `partial`: a piece holding an unknown
        part is unknown), each at its own position."""
        text = self.text if self.text is not None else self.partial
        assert text is not None
        spans = self.spans or ((0, self.position),)
        for match in re.finditer(r"\S+", text):
            offset = match.start()
            base, at = max((s for s in spans if s[0] <= offset), key=lambda s: s[0])
            position = _advance(at, text[base:offset])
            piece = match.group()
            if UNKNOWN in piece:
                index = text.count(UNKNOWN, 0, offset)
                why = self.unknowns[index] if index < len(self.unknowns) else self.why
                yield Word(None, position, why)
            else:
                yield Word(piece, position)


def _advance(position: Position, text: str) -> Position:
    """The position just after `text`, written from `position`."""
    newlines = text.count("\n")
    if newlines:
        return Position(position.line + newlines, len(text) - text.rfind("\n"))
    return Position(position.line, position.col + len(text))


@dataclass(frozen=True)
class Command:
    words: tuple[Word, ...]
    position: Position
    # `NAME=value cmd`: NAME is set in cmd's environment only (what a script it runs sees),
    # neither in the shell's variables nor in cmd's own words, which bash expands first
    environment: tuple[tuple[str, Word], ...] = ()


@dataclass(frozen=True)
class Script:
    commands: tuple[Command, ...]
    variables: dict[str, tuple[Word, ...]]  # the final value of every variable the file sets
    sourced: tuple[tuple[str, Position], ...]  # `source FILE` / `. FILE`: not followed
    # Words the caller's environment decides: where each was written -> (the variable, which
    # the script never assigns; the default the script falls back to, None when it has none):
    # `${TP}`, and `${TP:-4}`, whose 4 holds only while the caller leaves TP unset
    from_caller: dict[Position, tuple[str, str | None]] = field(default_factory=dict)


# Variables a job scheduler or MPI launcher sets in the job's environment (Slurm, PBS, LSF,
# Open MPI, PMI/PMIx): a script's default for them is for a local run.
_SCHEDULER_PREFIXES = ("SLURM_", "PBS_", "LSB_", "OMPI_", "PMI_", "PMIX_")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(\+?=)")
_COMPOUND_OPEN = frozenset({"if", "for", "while", "until", "case", "select"})
_COMPOUND_CLOSE = frozenset({"fi", "done", "esac"})
_DECLARE = frozenset({"export", "declare", "local", "readonly", "typeset"})
_METACHARS = " \t\n;&|()<>"


# -- lexing ---------------------------------------------------------------------------------------
# A raw word is a list of parts: ("lit", text, offset) | ("sq", text, offset) for single quotes |
# ("dq", parts) for double quotes | ("var", expression, offset) for $NAME and ${...} |
# ("cmd", offset) for $(...) and backquotes | ("arith", text, offset) for $((...)).


class _Lexer:
    def __init__(
        self, text: str, start: int = 0, end: int | None = None, lines: list[int] | None = None
    ) -> None:
        self.text = text
        self.i = start
        self.end = len(text) if end is None else end  # lex text[start:end], offsets in text
        # `lines`: the enclosing lexer's index of the same text (a ${VAR:-default} is lexed
        # apart; indexing the file again for each default made a file of them quadratic)
        self.line_starts = lines or [0] + [m.end() for m in re.finditer("\n", text)]
        self.heredocs: list[tuple[str, bool]] = []  # (delimiter, <<- strips tabs) this line
        self.arithmetic = -1  # where the (( ... )) being lexed ends: a << in it is a shift

    def position(self, offset: int) -> Position:
        lo, hi = 0, len(self.line_starts) - 1
        while lo < hi:  # the last line start at or before offset
            mid = (lo + hi + 1) // 2
            if self.line_starts[mid] <= offset:
                lo = mid
            else:
                hi = mid - 1
        return Position(lo + 1, offset - self.line_starts[lo] + 1)

    def fail(self, message: str, offset: int) -> ShellError:
        return ShellError(message, self.position(offset))

    def tokens(self) -> Iterator[tuple[str, object, int]]:
        """("word", parts, offset) | ("op", text, offset) | ("newline", "", offset)."""
        text, n = self.text, len(self.text)
        while self.i < n:
            c = text[self.i]
            if c == "\\" and text.startswith("\\\n", self.i):
                self.i += 2  # a continued line
            elif c in " \t\r":
                self.i += 1
            elif c == "#":
                end = text.find("\n", self.i)
                self.i = n if end < 0 else end
            elif c == "\n" or c == ";":
                yield "newline", c, self.i
                self.i += 1
                if c == "\n" and self.heredocs:
                    self._skip_heredocs()
            elif c in "&|":
                start = self.i
                self.i += 2 if text.startswith(c * 2, self.i) else 1
                yield "op", text[start : self.i], start
            elif c in "()":
                if text.startswith("((", self.i) and self.i > self.arithmetic:
                    try:
                        self.arithmetic = self._closing(self.i + 2, "(", ")", "((...))")
                    except ShellError:
                        self.arithmetic = n
                yield "op", c, self.i
                self.i += 1
            elif c in "<>":
                start = self.i
                while self.i < n and text[self.i] in "<>&":
                    self.i += 1
                op = text[start : self.i]
                if op == "<<" and start > self.arithmetic:  # not <<<, a here-string
                    self._heredoc()
                yield "op", op, start
            else:
                start = self.i
                yield "word", self._word(), start

    def _heredoc(self) -> None:
        """After `<<`: the delimiter word (`EOF`, `'EOF'`, `"EOF"`, `<<-EOF`), whose body starts
        on the next line. Bash matches the body's last line against the word with its quotes
        removed; `<<-` strips leading tabs first."""
        tabs = self.text.startswith("-", self.i)
        self.i += 1 if tabs else 0
        while self.i < self.end and self.text[self.i] in " \t":
            self.i += 1
        start = self.i
        self._word()
        delimiter = re.sub(r"[\\'\"]", "", self.text[start : self.i])
        if delimiter:
            self.heredocs.append((delimiter, tabs))

    def _skip_heredocs(self) -> None:
        """Pass over the bodies of the here-documents opened on the line just ended: they are
        the command's input, data rather than shell words (an apostrophe there opens no quote).
        A body without its delimiter runs to the end of the file, as bash reads it."""
        text = self.text
        for delimiter, tabs in self.heredocs:
            while self.i < len(text):
                end = text.find("\n", self.i)
                end = len(text) if end < 0 else end
                line = text[self.i : end]
                self.i = end + 1
                if (line.lstrip("\t") if tabs else line) == delimiter:
                    break
        self.heredocs.clear()

    def _word(self, blanks_end: bool = True) -> list[tuple]:
        """The parts of one word; with `blanks_end` False, of everything up to `end` (the
        default of a ${VAR:-default}, where blanks are literal)."""
        text, n = self.text, self.end
        stops = _METACHARS if blanks_end else ""
        parts: list[tuple] = []
        while self.i < n:
            c = text[self.i]
            if c == "\\":
                if text.startswith("\\\n", self.i):
                    self.i += 2
                    continue
                parts.append(("lit", text[self.i + 1 : self.i + 2], self.i + 1))
                self.i += 2
            elif c == "'":
                end = text.find("'", self.i + 1)
                if end < 0:
                    raise self.fail("unterminated single quote", self.i)
                parts.append(("sq", text[self.i + 1 : end], self.i + 1))
                self.i = end + 1
            elif c == '"':
                parts.append(("dq", self._double_quoted()))
            elif c == "$":
                parts.append(self._dollar())
            elif c == "`":
                end = text.find("`", self.i + 1)
                if end < 0:
                    raise self.fail("unterminated backquote", self.i)
                parts.append(("cmd", self.i))
                self.i = end + 1
            elif c in stops or c == "\r":
                break
            else:
                start = self.i
                while self.i < n and text[self.i] not in stops + "\\'\"$`\r":
                    self.i += 1
                parts.append(("lit", text[start : self.i], start))
        return parts

    def _double_quoted(self) -> list[tuple]:
        text, n = self.text, len(self.text)
        opened = self.i
        self.i += 1
        parts: list[tuple] = []
        while True:
            if self.i >= n:
                raise self.fail("unterminated double quote", opened)
            c = text[self.i]
            if c == '"':
                self.i += 1
                return parts
            if c == "\\" and self.i + 1 < n and text[self.i + 1] in '$`"\\\n':
                if text[self.i + 1] != "\n":
                    parts.append(("lit", text[self.i + 1], self.i + 1))
                self.i += 2
            elif c == "$":
                parts.append(self._dollar())
            elif c == "`":
                end = text.find("`", self.i + 1)
                if end < 0:
                    raise self.fail("unterminated backquote", self.i)
                parts.append(("cmd", self.i))
                self.i = end + 1
            else:
                start = self.i
                while self.i < n and text[self.i] not in '"\\$`':
                    self.i += 1
                if self.i == start:  # a lone backslash before an ordinary character
                    self.i += 1
                parts.append(("lit", text[start : self.i], start))

    def _closing(self, start: int, open_: str, close: str, what: str) -> int:
        """Index of the `close` that balances the `open_` just before `start`."""
        depth, j, text = 1, start, self.text
        while j < len(text):
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == open_:
                depth += 1
            elif text[j] == close:
                depth -= 1
                if depth == 0:
                    return j
            j += 1
        raise self.fail(f"unterminated {what}", start - 2)

    def _dollar(self) -> tuple:
        text, start = self.text, self.i
        if text.startswith("$((", start):
            end = self._closing(start + 3, "(", ")", "arithmetic $((...))")
            if not text.startswith(")", end + 1):
                raise self.fail("unterminated arithmetic $((...))", start)
            self.i = end + 2
            return ("arith", text[start + 3 : end], start)
        if text.startswith("$(", start):
            end = self._closing(start + 2, "(", ")", "command substitution $(...)")
            self.i = end + 1
            return ("cmd", start)
        if text.startswith("${", start):
            end = self._closing(start + 2, "{", "}", "${...}")
            self.i = end + 1
            return ("var", text[start + 2 : end], start + 2)
        match = _NAME.match(text, start + 1)
        if match:
            self.i = match.end()
            return ("var", match.group(), start + 1)
        if start + 1 < len(text) and text[start + 1] in "@*#?$!0123456789-":
            self.i = start + 2
            return ("var", text[start + 1], start + 1)
        self.i = start + 1
        return ("lit", "$", start)


# -- expansion ------------------------------------------------------------------------------------

_UNKNOWN = object()
_ARITH_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
}


def _arith(expression: str, lookup: Callable[[str], str | None]) -> int | None:
    """Bash integer arithmetic over literals and known variables; None when unknown. The
    caller refuses an expression over MAX_ARITHMETIC characters (the tree is walked
    recursively)."""
    source = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expression).replace("/", "//")
    try:
        tree = ast.parse(source.strip(), mode="eval")
    except SyntaxError:
        return None

    def value(node: ast.AST) -> int | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            known = lookup(node.id)
            return whole(known) if known is not None else None
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            inner = value(node.operand)
            return None if inner is None else -inner
        if isinstance(node, ast.BinOp) and type(node.op) in _ARITH_OPS:
            left, right = value(node.left), value(node.right)
            if left is None or right is None or (right == 0 and type(node.op) is not ast.Add):
                return None if left is None or right is None else _zero(node, left, right)
            if abs(left) > 10**18 or abs(right) > 10**18:
                return None
            return _ARITH_OPS[type(node.op)](left, right)
        return None

    return value(tree.body)


def _zero(node: ast.BinOp, left: int, right: int) -> int | None:
    if isinstance(node.op, (ast.FloorDiv, ast.Mod)):
        return None  # division by zero: bash fails; nothing to read
    return _ARITH_OPS[type(node.op)](left, right)


class _State:
    def __init__(self, lexer: _Lexer, environment: Mapping[str, str]) -> None:
        self.lexer = lexer
        self.variables: dict[str, tuple[Word, ...]] = {}
        self.environment = environment  # the caller's, for the variables the file never sets
        self.from_caller: dict[Position, tuple[str, str | None]] = {}
        self.nesting = 0  # ${VAR:-default}s being expanded, one inside the other
        self.expanded = 0  # characters and words every expansion produced so far

    def charge(self, size: int, where: Position | int) -> None:
        """Count what an expansion produced against MAX_EXPANSION: a script of self-doubling
        assignments (A=$A$A) must end as an error, not as gigabytes."""
        self.expanded += size + 1
        if self.expanded > MAX_EXPANSION:
            raise ShellError(
                f"the script's expansions produce more than {MAX_EXPANSION:,} characters and "
                "words (self-repeating assignments?): the limit a static reader follows",
                where if isinstance(where, Position) else self.lexer.position(where),
            )

    def scalar(self, name: str) -> str | None:
        if name not in self.variables and name in self.environment:
            return self.environment[name]
        words = self.variables.get(name)
        if not words or any(w.text is None for w in words):
            return None
        return " ".join(w.text for w in words if w.text is not None)

    def expand(self, parts: list[tuple], offset: int) -> list[Word]:
        """Expand one raw word into zero or more words (unquoted variables split on blanks)."""
        words: list[Word] = []
        current: list[str] = []
        spans: list[tuple[int, Position]] = []
        unknown = ""
        here = self.lexer.position(offset)
        started = False  # whether the current word has any part (so "" stays a word)
        whys: list[str] = []  # why, for each unknown part of the current word

        def flush() -> None:
            nonlocal current, spans, unknown, here, started, whys
            if started:
                joined = "".join(current)
                self.charge(len(joined), offset)
                text, partial = (None, joined) if unknown else (joined, None)
                words.append(
                    Word(text, here, unknown, tuple(spans) if joined else (), partial, tuple(whys))
                )
            current, spans, unknown, started, whys = [], [], "", False, []

        def add(text: str, position: Position) -> None:
            spans.append((sum(map(len, current)), position))
            current.append(text)

        for part in self._flatten(parts):
            kind = part[0]
            if kind == "text":
                _, text, position, quoted = part
                if quoted:
                    if not started:
                        here = position
                    add(text, position)
                    started = True
                    continue
                for piece, piece_position in _split(text, position):
                    if piece is None:  # a blank: ends the current word
                        flush()
                        continue
                    if not started:
                        here = piece_position
                    add(piece, piece_position)
                    started = True
            elif kind == "word":  # a whole word from an array element or an earlier value
                _, word, quoted, last = part
                if not started:
                    here = word.position
                if word.text is None:
                    unknown = unknown or word.why
                    add(word.partial or UNKNOWN, word.position)
                    whys.extend(word.unknowns or (word.why,))
                else:
                    for k, (at, position) in enumerate(word.spans or ((0, word.position),)):
                        end = word.spans[k + 1][0] if k + 1 < len(word.spans) else None
                        add(word.text[at:end], position)
                started = True
                if not last:
                    flush()
            else:  # ("unknown", why, position)
                if not started:
                    here = part[2]
                unknown = unknown or part[1]
                add(UNKNOWN, part[2])
                whys.append(part[1])
                started = True
        flush()
        return words

    def _flatten(self, parts: list[tuple], quoted: bool = False) -> Iterator[tuple]:
        """Parts as ("text", text, position, quoted) | ("word", Word, quoted, last) |
        ("unknown", why, position)."""
        for part in parts:
            kind = part[0]
            if kind in ("lit", "sq"):
                yield "text", part[1], self.lexer.position(part[2]), quoted or kind == "sq"
            elif kind == "dq":
                if not part[1]:
                    yield "text", "", self.lexer.position(0), True
                yield from self._flatten(part[1], quoted=True)
            elif kind == "cmd":
                yield "unknown", "a command substitution", self.lexer.position(part[1])
            elif kind == "arith":
                position = self.lexer.position(part[2])
                if len(part[1]) > MAX_ARITHMETIC:
                    raise ShellError(
                        f"an arithmetic expression longer than {MAX_ARITHMETIC} characters",
                        position,
                    )
                value = _arith(part[1], self.scalar)
                if value is None:
                    yield (
                        "unknown",
                        f"arithmetic over values the file does not set: $(({part[1].strip()}))",
                        position,
                    )
                else:
                    yield "text", str(value), position, True
            else:
                yield from self._variable(part[1], part[2], quoted)

    def _variable(self, expression: str, offset: int, quoted: bool) -> Iterator[tuple]:
        position = self.lexer.position(offset - 1)
        match = re.fullmatch(
            r"([A-Za-z_][A-Za-z0-9_]*)(?:\[([@*]|[0-9]{1,9})\])?(?:(:?[-=])(.*))?", expression, re.S
        )
        if match is None:
            yield "unknown", f"the expansion ${{{expression}}}", position
            return
        name, index, op, default = match.groups()
        words = self.variables.get(name)
        if words is None and name in self.environment:
            words = (Word(self.environment[name], position),)
        if words is None and name.startswith(_SCHEDULER_PREFIXES):
            # ${SLURM_NNODES:-1}: the scheduler sets it for the job; the default only serves
            # a run on one machine, so it says nothing about the cluster
            yield "unknown", f"${name}, which the job scheduler sets at launch", position
            return
        empty = words is None or (
            op is not None and op.startswith(":") and not any(w.text for w in words)
        )
        if empty and op is not None:
            # ${VAR:-default}: the default, expanded where it is written
            base = offset + match.start(4)
            lexer = _Lexer(self.lexer.text, base, base + len(default), self.lexer.line_starts)
            self.nesting += 1
            if self.nesting > MAX_NESTING:
                raise ShellError(
                    f"parameter expansions nested deeper than {MAX_NESTING} levels", position
                )
            parts = lexer._word(blanks_end=False)
            value = self.expand(parts, base) if parts else [Word("", self.lexer.position(base))]
            self.nesting -= 1
            if op.endswith("="):
                self.variables[name] = tuple(value)
            if words is None:  # never assigned: the caller may set it instead (the outermost
                for word in value:  # of nested defaults, expanded last, decides)
                    self.from_caller[word.position] = (name, word.text)
            for k, word in enumerate(value):
                yield "word", word, True, k == len(value) - 1
            return
        if words is None:
            self.from_caller[position] = (name, None)
            why = f"${name}, which the caller's environment sets: the script does not assign {name}"
            yield "unknown", why, position
            return
        if index is not None and index not in "@*":
            i = int(index)
            words = words[i : i + 1]
        for k, word in enumerate(words):
            known = word.text is not None or word.partial is not None
            if known and not quoted:
                # an unquoted expansion splits into words (an array's elements too)
                pieces = list(word.pieces())
                for j, piece in enumerate(pieces):
                    yield "word", piece, quoted, k == len(words) - 1 and j == len(pieces) - 1
                continue
            yield "word", word, quoted, k == len(words) - 1


def _split(text: str, position: Position) -> Iterator[tuple[str | None, Position]]:
    """Blank-separated pieces of `text` with their positions (None marks a blank)."""
    for match in re.finditer(r"\s+|\S+", text):
        piece = match.group()
        yield (None if piece.isspace() else piece), position
        position = _advance(position, piece)


# -- statements -----------------------------------------------------------------------------------


@dataclass
class _Block:
    """An open if/for/while/case. `runs`: whether the branch being read runs (None: not known
    statically, as in every loop); `taken`: an earlier branch of this `if` surely ran;
    `known`: every earlier test of this `if` was known."""

    runs: bool | None
    taken: bool = False
    known: bool = True

    def branch(self, test: bool | None) -> None:
        """Enter the next branch (`elif` with its test, `else` with True)."""
        if self.taken or test is False:
            self.runs = False
        elif test is None or not self.known:
            self.runs, self.known = None, False
        else:
            self.runs = self.taken = True


def parse(text: str, environment: Mapping[str, str] | None = None) -> Script:
    """Follow the script's assignments in order and expand every simple command.
    `environment`: the caller's, read for the variables the script never assigns."""
    # CRLF line ends (a checkout on Windows) read as the LF file git stores: a backslash
    # before CR-LF continues the line, and no word ends in a CR
    lexer = _Lexer(text.replace("\r\n", "\n"))
    state = _State(lexer, environment or {})
    commands: list[Command] = []
    sourced: list[tuple[str, Position]] = []
    blocks: list[_Block] = []  # the open if/for/while/case, innermost last
    tokens = list(lexer.tokens())
    i = 0
    while i < len(tokens):
        # one simple command: words up to a newline, ; or an operator
        start = i
        while i < len(tokens) and tokens[i][0] == "word":
            i += 1
        raw = tokens[start:i]
        if i < len(tokens) and tokens[i] == ("op", "(", tokens[i][2]) and raw:
            # NAME=( ... ): an array assignment, possibly over several lines
            close = i + 1
            while close < len(tokens) and tokens[close][:2] != ("op", ")"):
                close += 1
            elements = [t for t in tokens[i + 1 : close] if t[0] == "word"]
            if all(b.runs is not False for b in blocks):
                _assign_array(state, raw, elements, any(b.runs is None for b in blocks))
            i = close + 1
            continue
        if raw:
            # a test joined to another by && or || is not read
            alone = i >= len(tokens) or tokens[i][0] == "newline"
            _statement(state, raw, blocks, alone, commands, sourced)
        i += 1
    return Script(tuple(commands), dict(state.variables), tuple(sourced), state.from_caller)


def _joined_spans(words: list[Word]) -> tuple[tuple[int, Position], ...]:
    """The spans of `words` joined with single blanks, as an assignment's value is."""
    spans: list[tuple[int, Position]] = []
    offset = 0
    for word in words:
        spans.extend((offset + at, p) for at, p in (word.spans or ((0, word.position),)))
        offset += len(_shown(word)) + 1
    return tuple(spans)


def _shown(word: Word) -> str:
    """A word's text, or its partial text with UNKNOWN for the parts not known."""
    return word.text if word.text is not None else (word.partial or UNKNOWN)


def _literal(parts: list[tuple]) -> str | None:
    if all(p[0] in ("lit", "sq") for p in parts):
        return "".join(p[1] for p in parts)
    return None


def _assignment(parts: list[tuple]) -> tuple[str, str, list[tuple]] | None:
    """(name, operator, value parts) when the raw word is NAME=value or NAME+=value."""
    if not parts or parts[0][0] != "lit":
        return None
    match = _ASSIGN.match(parts[0][1])
    if match is None or match.group(2):
        return None
    rest = parts[0][1][match.end() :]
    value = ([("lit", rest, parts[0][2] + match.end())] if rest else []) + list(parts[1:])
    return match.group(1), match.group(3), value


def _assign_array(state: _State, raw: list, elements: list, uncertain: bool) -> None:
    head = raw[-1]
    found = _assignment(head[1])
    if found is None:
        return
    name, op, _ = found
    words: list[Word] = []
    for _, parts, offset in elements:
        words.extend(state.expand(parts, offset))
    if uncertain:
        line = state.lexer.position(head[2]).line
        why = f"${name} is changed inside a conditional or loop at line {line}"
        words = [Word(None, w.position, why) for w in words]
    before = list(state.variables.get(name, ())) if op == "+=" else []
    state.charge(len(before), state.lexer.position(head[2]))  # A=(${A[@]} ${A[@]}) doubles
    state.variables[name] = tuple(before + words)


_COMPARE: dict[str, Callable[[str, str], bool]] = {
    "==": operator.eq,
    "=": operator.eq,
    "!=": operator.ne,
}
_INT_COMPARE: dict[str, Callable[[int, int], bool]] = {
    "-eq": operator.eq,
    "-ne": operator.ne,
    "-lt": operator.lt,
    "-le": operator.le,
    "-gt": operator.gt,
    "-ge": operator.ge,
}


def _test(state: _State, raw: list, alone: bool) -> bool | None:
    """The outcome of an `if`/`elif` test over values the file sets: `[ A OP B ]`,
    `[[ A OP B ]]` or `test A OP B` with =, ==, != or an integer comparison, `-z A`, `-n A`,
    each optionally negated with `!`. None for anything else (a command, a glob pattern, a
    test joined to another with && or ||, a value the file does not set)."""
    words: list[Word] = []
    for _, parts, offset in raw:
        words.extend(state.expand(parts, offset))
    if not alone or any(w.text is None for w in words):
        return None
    texts = [w.text or "" for w in words]
    negate = False
    if texts[:1] == ["!"]:
        negate, texts = True, texts[1:]
    if texts[:1] == ["test"]:
        texts = texts[1:]
    elif len(texts) >= 2 and (texts[0], texts[-1]) in (("[", "]"), ("[[", "]]")):
        texts = texts[1:-1]
    else:
        return None
    if texts[:1] == ["!"]:
        negate, texts = not negate, texts[1:]
    outcome: bool | None = None
    if len(texts) == 2 and texts[0] in ("-z", "-n"):
        outcome = (texts[1] == "") == (texts[0] == "-z")
    elif len(texts) == 3 and texts[1] in _COMPARE and not re.search(r"[*?\[]", texts[2]):
        outcome = _COMPARE[texts[1]](texts[0], texts[2])
    elif len(texts) == 3 and texts[1] in _INT_COMPARE:
        try:
            outcome = _INT_COMPARE[texts[1]](int(texts[0]), int(texts[2]))
        except ValueError:
            return None
    return None if outcome is None else outcome != negate


def _statement(
    state: _State,
    raw: list,
    blocks: list[_Block],
    alone: bool,
    commands: list[Command],
    sourced: list[tuple[str, Position]],
) -> None:
    first = _literal(raw[0][1])
    if first == "if":
        blocks.append(_Block(None))
        blocks[-1].branch(_test(state, raw[1:], alone))
        return
    if first in _COMPOUND_OPEN:
        blocks.append(_Block(None))
        return
    if first in _COMPOUND_CLOSE:
        if blocks:
            blocks.pop()
        return
    if first in ("elif", "else") and blocks:
        test = _test(state, raw[1:], alone) if first == "elif" else True
        blocks[-1].branch(test)
        if first == "elif":
            return
    if first in ("then", "do", "else", "in", "{", "}"):
        raw = raw[1:]
        if not raw:
            return
        first = _literal(raw[0][1])
    if any(b.runs is False for b in blocks):
        return  # a branch that cannot run
    uncertain = any(b.runs is None for b in blocks)
    if first in ("source", ".") and len(raw) > 1:
        target = state.expand(raw[1][1], raw[1][2])
        name = target[0].text if target and target[0].text else "a file"
        sourced.append((name, state.lexer.position(raw[1][2])))
        return
    if first in _DECLARE:
        raw = [w for w in raw[1:] if not (_literal(w[1]) or "").startswith("-")]
        if not raw:
            return
    k = 0
    while k < len(raw) and _assignment(raw[k][1]) is not None:
        k += 1
    if k < len(raw):
        # NAME=value before a command: that command's environment only; bash expands the
        # command's words first, and the shell's own variables stay as they were
        words = []
        for _, parts, offset in raw[k:]:
            words.extend(state.expand(parts, offset))
        shell: dict[str, tuple[Word, ...] | None] = {}  # what the assignments hide, to restore
        environment = []
        for head in raw[:k]:  # left to right: `A=1 B=$A cmd` gives cmd B=1
            name, word = _assigned(state, head, uncertain)
            shell.setdefault(name, state.variables.get(name))
            state.variables[name] = (word,)
            environment.append((name, word))
        for name, before in shell.items():
            if before is None:
                del state.variables[name]
            else:
                state.variables[name] = before
        commands.append(Command(tuple(words), state.lexer.position(raw[k][2]), tuple(environment)))
        return
    for head in raw:
        name, word = _assigned(state, head, uncertain)
        state.variables[name] = (word,)


def _assigned(state: _State, head: tuple, uncertain: bool) -> tuple[str, Word]:
    """The name and value of one NAME=value or NAME+=value word (`uncertain`: inside a
    conditional or loop whose outcome is not known)."""
    found = _assignment(head[1])
    assert found is not None
    name, op, value = found
    words = state.expand(value, head[2]) if value else [Word("", state.lexer.position(head[2]))]
    text = (
        None
        if any(w.text is None for w in words)
        else " ".join(w.text for w in words if w.text is not None)
    )
    why = next((w.why for w in words if w.text is None), "")
    position = words[0].position if words else state.lexer.position(head[2])
    if uncertain:
        why = f"${name} is set inside a conditional or loop at line {position.line}"
        text = None
    partial: str | None = None
    unknowns: tuple[str, ...] = ()
    if text is None and not uncertain and op != "+=":
        # what is known of the value, for a later unquoted expansion to split
        partial = " ".join(_shown(w) for w in words)
        unknowns = tuple(y for w in words if w.text is None for y in w.unknowns or (w.why,))
    if op == "+=" and name in state.variables:
        prior = state.scalar(name)
        text = None if prior is None or text is None else prior + text
        state.charge(len(text or ""), position)
    spans = _joined_spans(words) if text or partial else ()
    return name, Word(text, position, why, spans, partial, unknowns)
