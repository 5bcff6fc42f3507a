"""dpguard.yamlsource: hostile and broken input, each with its exact message and position.

Every case here must fail with one positioned message (a YamlLoadError carrying a code), never a
traceback; only a missing path or a directory raises InputError. Messages are asserted verbatim.
"""

from __future__ import annotations

import itertools
import os
from pathlib import Path
from typing import Any

import pytest

from dpguard import yamlsource
from dpguard.errors import InputError
from dpguard.yamlsource import (
    MAX_BYTES,
    MAX_DEPTH,
    MAX_VALUES,
    Position,
    SourceDoc,
    YamlLoadError,
    load_file,
    load_text,
)


def failure(text: str) -> tuple[str, int, int, str]:
    """(code, line, col, message) of the one error loading `text` raises."""
    with pytest.raises(YamlLoadError) as caught:
        load_text(text, "m.yaml")
    err = caught.value
    return err.code, err.position.line, err.position.col, err.message


def file_failure(path: Path) -> tuple[str, int, int, str]:
    with pytest.raises(YamlLoadError) as caught:
        load_file(str(path))
    err = caught.value
    return err.code, err.position.line, err.position.col, err.message


def data(text: str) -> dict[str, Any]:
    return load_text(text, "m.yaml").data


# Every test in this module runs twice: with events from libyaml (PyYAML's C parser, the default
# when PyYAML has it) and from ruamel.yaml's pure-Python parser (the fallback). Only the parsers'
# own wording of a syntax error differs; codes, positions and dpguard's messages must not.
@pytest.fixture(autouse=True, params=[True, False], ids=["libyaml", "pure-python"])
def backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param and not yamlsource._libyaml():
        pytest.fail("PyYAML was built without libyaml: the fast path is untested")
    monkeypatch.setattr(yamlsource, "FAST", request.param)
    return "libyaml" if request.param else "pure"


# --- invalid YAML, empty files, several documents, the root -----------------------------------

FLOW = " (while parsing a flow sequence that starts at line 1)"
BLOCK = " (while parsing a block collection that starts at line 2)"
TOKEN = " (while scanning for the next token)"


@pytest.mark.parametrize(
    ("text", "where", "libyaml", "pure"),
    [
        (
            "a: [1, 2\nb: 3\n",
            (2, 2),
            "did not find expected ',' or ']'" + FLOW,
            "expected ',' or ']', but got ':'" + FLOW,
        ),
        (
            "a: b: c\n",
            (1, 5),
            "mapping values are not allowed in this context",
            "mapping values are not allowed here",
        ),
        (
            "a:\n  b: 1\n   c: 2\n",
            (3, 5),
            "mapping values are not allowed in this context",
            "mapping values are not allowed here",
        ),
        (
            "a:\n  - 1\n  b: 2\n",
            (3, 3),
            "did not find expected '-' indicator" + BLOCK,
            "expected <block end>, but found '?'" + BLOCK,
        ),
        (
            "a: 'open\n",
            (2, 1),
            "found unexpected end of stream (while scanning a quoted scalar that starts at line 1)",
            "found unexpected end of stream (while scanning a quoted scalar that starts at line 1)",
        ),
        (
            "a:\n\tb: 1\n",
            (2, 1),
            "found character that cannot start any token"
            " (while scanning for the next token that starts at line 2)",
            "found character '\\t' that cannot start any token" + TOKEN,
        ),
    ],
    ids=["unclosed-flow", "nested-colon", "bad-indent", "seq-then-key", "unterminated", "tab"],
)
def test_invalid_yaml(
    text: str, where: tuple[int, int], libyaml: str, pure: str, backend: str
) -> None:
    message = libyaml if backend == "libyaml" else pure
    assert failure(text) == ("Y001", *where, f"invalid YAML: {message}")


def test_tab_after_a_colon_is_separation_whitespace() -> None:
    # YAML 1.2 allows tabs as separation space; ruamel's scanner wrongly refuses this line, so
    # only the libyaml path accepts it. dpguard documents libyaml as the reference behaviour.
    if yamlsource.FAST:
        assert data("a:\t1\n") == {"a": 1}
    else:
        assert failure("a:\t1\n")[0] == "Y001"


@pytest.mark.parametrize("text", ["", "\n\n", "   \n", "# only a comment\n# and another\n"])
def test_empty_or_comment_only_file(text: str) -> None:
    assert failure(text) == ("Y002", 1, 1, "the file is empty: expected a mapping")


@pytest.mark.parametrize(
    ("text", "line"),
    [("a: 1\n---\nb: 2\n", 2), ("---\na: 1\n---\nb: 2\n", 3), ("a: 1\n---\n", 2)],
)
def test_several_documents(text: str, line: int) -> None:
    assert failure(text) == (
        "Y003",
        line,
        1,
        "more than one YAML document in the file: one document per file",
    )


@pytest.mark.parametrize("text", ["---\na: 1\n", "a: 1\n...\n", "%YAML 1.2\n---\na: 1\n...\n"])
def test_one_document_with_markers_loads(text: str) -> None:
    assert data(text) == {"a": 1}


@pytest.mark.parametrize(
    ("text", "kind", "line"),
    [
        ("- a\n- b\n", "list", 1),
        ("# a comment first\n- a\n", "list", 2),
        ("just text\n", "string", 1),
        ("42\n", "number", 1),
        ("true\n", "boolean", 1),
        ("~\n", "null", 1),
        ("null\n", "null", 1),
        ("[a, b]\n", "list", 1),
    ],
)
def test_root_must_be_a_mapping(text: str, kind: str, line: int) -> None:
    assert failure(text) == ("Y004", line, 1, f"the top level must be a mapping, not a {kind}")


# --- keys -------------------------------------------------------------------------------------


def test_duplicate_key_names_the_first_line() -> None:
    text = "apiVersion: dpguard/v1\nkind: TrainingManifest\napiVersion: dpguard/v2\n"
    assert failure(text) == (
        "Y005",
        3,
        1,
        "duplicate key 'apiVersion' (first defined at line 1)",
    )


def test_nested_duplicate_key() -> None:
    text = "cluster:\n  gpus: 8\n  accelerator: H100\n  gpus: 16\n"
    assert failure(text) == ("Y005", 4, 3, "duplicate key 'gpus' (first defined at line 2)")


def test_duplicate_key_in_flow_mapping() -> None:
    assert failure("a: {b: 1, c: 2, b: 3}\n") == (
        "Y005",
        1,
        17,
        "duplicate key 'b' (first defined at line 1)",
    )


@pytest.mark.parametrize(
    ("text", "col"),
    [("? [a, b]\n: 1\n", 3), ("? {a: 1}\n: 1\n", 3), ("a: &k [x]\n*k : 1\n", 1)],
)
def test_collection_keys_are_refused(text: str, col: int) -> None:
    code, _line, got_col, message = failure(text)
    assert (code, got_col, message) == ("Y005", col, "mapping keys must be strings")


def test_scalar_keys_are_taken_as_written() -> None:
    # `1:` or `true:` as a key is the text "1" / "true"; the schema then names it as unknown.
    assert data("1: a\ntrue: b\n~: c\n0x10: d\n") == {"1": "a", "true": "b", "~": "c", "0x10": "d"}


# --- tags -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "tag", "col"),
    [
        (
            "cmd: !!python/object/apply:os.system ['echo pwned']\n",
            "python/object/apply:os.system",
            6,
        ),
        ("cmd: !!python/object/new:os.system {args: [x]}\n", "python/object/new:os.system", 6),
        ("cmd: !!python/object:builtins.dict {a: 1}\n", "python/object:builtins.dict", 6),
        ("cmd: !!python/name:os.system ''\n", "python/name:os.system", 6),
        ("cmd: !!python/module:os ''\n", "python/module:os", 6),
        ("cmd: !!python/tuple [1, 2]\n", "python/tuple", 6),
        (
            "a:\n  b: !!python/object/apply:subprocess.call [[ls]]\n",
            "python/object/apply:subprocess.call",
            6,
        ),
        ("cmd: !!binary aGVsbG8=\n", "binary", 6),
        ("cmd: !!timestamp 2027-01-31\n", "timestamp", 6),
        ("cmd: !!set {a, b}\n", "set", 6),
        ("cmd: !!omap [a: 1]\n", "omap", 6),
    ],
)
def test_python_and_non_core_tags_are_refused(
    text: str, tag: str, col: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[object] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    line = text.count("\n", 0, text.index("!!")) + 1
    assert failure(text) == (
        "Y006",
        line,
        col,
        f"tag !!{tag} is not allowed: only plain YAML values are accepted",
    )
    assert calls == []


@pytest.mark.parametrize(
    ("text", "tag", "col"),
    [
        ("a: !foo bar\n", "!foo", 4),
        ("a: !foo {b: 1}\n", "!foo", 4),
        ("a: !foo [1]\n", "!foo", 4),
        ("!foo a: 1\n", "!foo", 1),
        ("!!int a: 1\n", "!!int", 1),
        ("a: !<tag:example.com,2000:x> 1\n", "tag:example.com,2000:x", 4),
        ("%TAG !e! tag:example.com,2000:\n---\na: !e!foo 1\n", "tag:example.com,2000:foo", 4),
        ("a: !!map [1]\n", "!!map", 4),
        ("a: !!seq {b: 1}\n", "!!seq", 4),
    ],
)
def test_custom_tags_are_refused(text: str, tag: str, col: int) -> None:
    code, _line, got_col, message = failure(text)
    assert (code, got_col, message) == (
        "Y006",
        col,
        f"tag {tag} is not allowed: only plain YAML values are accepted",
    )


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: !!str 5\n", "5"),
        ("a: !!str true\n", "true"),
        ("a: !!int '42'\n", 42),
        ("a: !!int 0x10\n", 16),
        ("a: !!int 3.0\n", 3),
        ("a: !!float 1\n", 1.0),
        ("a: !!float '2.5'\n", 2.5),
        ("a: !!bool true\n", True),
        ("a: !!bool False\n", False),
        ("a: !!null ''\n", None),
        ("a: !!null null\n", None),
        ("a: !!map {b: 1}\n", {"b": 1}),
        ("a: !!seq [1]\n", [1]),
        ("a: ! 5\n", "5"),
        ("!!str a: 1\n", None),
    ],
)
def test_core_tags_are_allowed(text: str, value: object) -> None:
    loaded = data(text)
    if text.startswith("!!str"):
        assert loaded == {"a": 1}
    else:
        assert loaded == {"a": value}
        assert type(loaded["a"]) is type(value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!int abc\n", "'abc' is not a valid !!int value"),
        ("a: !!int 1.5\n", "'1.5' is not a valid !!int value"),
        ("a: !!float abc\n", "'abc' is not a valid !!float value"),
        ("a: !!bool yes\n", "'yes' is not a valid !!bool value"),
        ("a: !!null x\n", "'x' is not a valid !!null value"),
    ],
)
def test_core_tag_with_a_value_it_cannot_hold(text: str, message: str) -> None:
    assert failure(text) == ("Y006", 1, 4, message)


# --- aliases ----------------------------------------------------------------------------------


def billion_laughs(levels: int = 9) -> str:
    names = "abcdefghijklmnopqrstuvwxyz"
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    for prev, name in itertools.pairwise(names[:levels]):
        lines.append(f"{name}: &{name} [{', '.join(['*' + prev] * 9)}]")
    return "\n".join(lines) + "\n"


def test_billion_laughs_fails_early_with_y007() -> None:
    # 9 levels would expand to 9**9 ~ 387 million strings; the loader counts values *after*
    # expansion and stops at the alias that crosses MAX_VALUES: on line 4 (level d), long before
    # the last level is even parsed.
    text = billion_laughs(9)
    assert text.count("\n") == 9
    assert failure(text) == (
        "Y007",
        4,
        4,
        f"document expands to more than {MAX_VALUES} values (an alias bomb?)",
    )


def test_wide_document_without_aliases_is_also_bounded() -> None:
    # no alias: a long file (a team's policy test cases), told to split, not called a bomb
    text = "a: [" + ", ".join(["1"] * (MAX_VALUES + 5)) + "]\n"
    code, line, _col, message = failure(text)
    assert (code, line, message) == (
        "Y007",
        1,
        f"document has more than {MAX_VALUES} values, the most dpguard reads in one document: "
        "split it into several files",
    )


def test_small_anchors_and_aliases_load() -> None:
    text = (
        "defaults: &defaults\n"
        "  tensor: 2\n"
        "  pipeline: 4\n"
        "name: &n run-1\n"
        "parallelism: *defaults\n"
        "alias_of_scalar: *n\n"
        "list: [*n, *n]\n"
    )
    loaded = data(text)
    assert loaded == {
        "defaults": {"tensor": 2, "pipeline": 4},
        "name": "run-1",
        "parallelism": {"tensor": 2, "pipeline": 4},
        "alias_of_scalar": "run-1",
        "list": ["run-1", "run-1"],
    }


def test_merge_keys_are_not_special() -> None:
    assert data("a: &x {b: 1}\nc:\n  <<: *x\n") == {"a": {"b": 1}, "c": {"<<": {"b": 1}}}


def test_undefined_alias() -> None:
    assert failure("a: *nowhere\n") == ("Y001", 1, 4, "alias *nowhere is not defined")


def test_recursive_alias() -> None:
    assert failure("a: &x [1, *x]\n") == (
        "Y001",
        1,
        11,
        "alias *x refers to a node that contains it",
    )


# --- nesting ----------------------------------------------------------------------------------


def flow(depth: int, opener: str = "[", closer: str = "]") -> str:
    return "a: " + opener * depth + closer * depth + "\n"


def block(depth: int) -> str:
    """`depth` block mappings nested in each other, the root mapping included."""
    return "".join("  " * i + "k:\n" for i in range(depth)) + "  " * depth + "v\n"


def test_nesting_up_to_the_limit_loads() -> None:
    # The root mapping is one level, so MAX_DEPTH - 1 more collections fit.
    assert data(flow(MAX_DEPTH - 1))["a"] is not None
    assert data("a: " + "{b: " * (MAX_DEPTH - 1) + "1" + "}" * (MAX_DEPTH - 1) + "\n")
    assert data(block(MAX_DEPTH))


def test_deep_flow_nesting_fails_at_the_first_bracket_too_deep() -> None:
    expected = ("Y008", 1, 4 + MAX_DEPTH - 1, f"nesting deeper than {MAX_DEPTH} levels")
    assert failure(flow(MAX_DEPTH)) == expected
    assert failure(flow(100_000)) == expected


def test_deep_flow_mapping_nesting() -> None:
    depth = 100_000
    text = "a: " + "{b: " * depth + "1" + "}" * depth + "\n"
    col = 4 + 4 * (MAX_DEPTH - 1)
    assert failure(text) == ("Y008", 1, col, f"nesting deeper than {MAX_DEPTH} levels")


def test_deep_block_nesting() -> None:
    # Line MAX_DEPTH+1 holds the first key of the mapping that would be level MAX_DEPTH+1.
    assert failure(block(MAX_DEPTH + 1)) == (
        "Y008",
        MAX_DEPTH + 1,
        2 * MAX_DEPTH + 1,
        f"nesting deeper than {MAX_DEPTH} levels",
    )


def test_deep_nesting_file_at_the_size_limit(write_manifest: Any) -> None:
    n = (MAX_BYTES - 4) // 2
    path = write_manifest("a: " + "[" * n + "]" * n + "\n")
    assert path.stat().st_size <= MAX_BYTES
    assert file_failure(path) == (
        "Y008",
        1,
        4 + MAX_DEPTH - 1,
        f"nesting deeper than {MAX_DEPTH} levels",
    )


# --- size -------------------------------------------------------------------------------------


def test_100_mb_file_is_refused_before_it_is_read(
    write_manifest: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_manifest(b"")
    with open(path, "r+b") as handle:
        handle.truncate(100 * 1024 * 1024)  # sparse: costs no disk
    opened: list[object] = []

    def no_open(*args: object, **kwargs: object) -> None:
        opened.append(args)
        raise AssertionError("the file must not be opened")

    monkeypatch.setattr(yamlsource, "open", no_open, raising=False)
    assert file_failure(path) == (
        "Y012",
        1,
        1,
        f"file is 104857600 bytes; the limit is {MAX_BYTES} bytes",
    )
    assert opened == []


def test_a_key_over_the_limit_is_refused_at_the_key() -> None:
    assert failure("a: 1\n" + "k" * 257 + ": 1\n") == (
        "Y013",
        2,
        1,
        "a key of 257 characters: the limit is 256",
    )
    assert data("k" * 256 + ": 1\n") == {"k" * 256: 1}


def test_size_limit_boundary(write_manifest: Any) -> None:
    body = "a: 1\n"
    pad = "#" * (MAX_BYTES - len(body) - 1) + "\n"
    exact = write_manifest(body + pad, "exact.yaml")
    assert exact.stat().st_size == MAX_BYTES
    assert load_file(str(exact)).data == {"a": 1}
    over = write_manifest(body + "#" + pad, "over.yaml")
    assert file_failure(over) == (
        "Y012",
        1,
        1,
        f"file is {MAX_BYTES + 1} bytes; the limit is {MAX_BYTES} bytes",
    )


def test_a_device_or_fifo_is_refused_before_a_byte_is_read(tmp_path: Path) -> None:
    # /dev/zero reports size 0 and never ends; a FIFO blocks a reader until a writer comes
    with pytest.raises(InputError, match="not a regular file"):
        load_file("/dev/zero")
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(InputError, match="not a regular file"):
        load_file(str(tmp_path / "fifo"))


# --- numbers ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value", [".nan", ".NaN", ".NAN", ".inf", ".Inf", "+.inf", "-.inf", "-.Inf", "-.INF", "1e400"]
)
def test_non_finite_numbers_are_refused(value: str) -> None:
    assert failure(f"training:\n  tokens: {value}\n") == (
        "Y010",
        2,
        11,
        f"{value} is not a finite number",
    )


def test_tagged_non_finite_float_is_refused() -> None:
    assert failure("a: !!float .nan\n") == ("Y010", 1, 4, ".nan is not a finite number")


@pytest.mark.parametrize("text", ["a: '.nan'\n", 'a: ".inf"\n', "a: nan\n", "a: inf\n"])
def test_nan_lookalikes_are_strings(text: str) -> None:
    assert isinstance(data(text)["a"], str)


def test_too_many_digits() -> None:
    assert data("a: " + "9" * 30 + "\n") == {"a": int("9" * 30)}
    assert data("a: -" + "9" * 30 + "\n") == {"a": -int("9" * 30)}
    assert failure("a: " + "1234567890" * 4000 + "\n") == (
        "Y011",
        1,
        4,
        "number 12345678901234567890... has too many digits (the limit is 30)",
    )
    assert failure("a: 0." + "1" * 40 + "\n") == (
        "Y011",
        1,
        4,
        "number 0.111111111111111111... has too many digits (the limit is 30)",
    )


# --- encoding and characters ------------------------------------------------------------------


def test_non_utf8_byte_is_positioned(write_manifest: Any) -> None:
    path = write_manifest(b"a: 1\nb: caf\xe9\n")
    assert file_failure(path) == ("Y009", 2, 7, "the file is not UTF-8 (byte 0xe9 at offset 11)")


def test_non_utf8_column_counts_characters(write_manifest: Any) -> None:
    # "b: é" is 4 characters but 5 bytes: the bad byte is in column 5.
    path = write_manifest("a: ü\nb: é".encode() + b"\xff\n")
    assert file_failure(path) == ("Y009", 2, 5, "the file is not UTF-8 (byte 0xff at offset 11)")


def test_non_utf8_after_a_bom(write_manifest: Any) -> None:
    path = write_manifest(b"\xef\xbb\xbfb: caf\xe9\n")
    assert file_failure(path) == ("Y009", 1, 7, "the file is not UTF-8 (byte 0xe9 at offset 9)")


def test_utf16_file_is_not_utf8(write_manifest: Any) -> None:
    path = write_manifest("a: 1\n".encode("utf-16"))
    assert file_failure(path) == ("Y009", 1, 1, "the file is not UTF-8 (byte 0xff at offset 0)")


@pytest.mark.parametrize(
    ("char", "code_point"),
    [("\x00", "0000"), ("\x01", "0001"), ("\x1b", "001B"), ("\x7f", "007F"), ("\ufffe", "FFFE")],
)
def test_control_characters_are_refused(char: str, code_point: str) -> None:
    text = f"a: 1\nb: 2\nname: ab{char}c\n"
    assert failure(text) == ("Y009", 3, 9, f"character U+{code_point} is not allowed in YAML")


def test_control_character_from_a_file(write_manifest: Any) -> None:
    path = write_manifest(b"a: 1\nb: x\x07\n")
    assert file_failure(path) == ("Y009", 2, 5, "character U+0007 is not allowed in YAML")


def test_utf8_bom_is_accepted(write_manifest: Any) -> None:
    path = write_manifest(b"\xef\xbb\xbfa: 1\nb: caf\xc3\xa9\n")
    doc = load_file(str(path))
    assert doc.data == {"a": 1, "b": "café"}
    assert doc.keys[("a",)] == Position(1, 1)
    assert doc.values[("b",)] == Position(2, 4)


# --- YAML 1.2 core schema ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("scalar", "value"),
    [
        ("yes", "yes"),
        ("no", "no"),
        ("on", "on"),
        ("off", "off"),
        ("y", "y"),
        ("Yes", "Yes"),
        ("true", True),
        ("True", True),
        ("TRUE", True),
        ("false", False),
        ("0x10", 16),
        ("0o17", 15),
        ("017", 17),
        ("1_000", 1000),
        ("+12", 12),
        ("-3", -3),
        ("1e3", 1000.0),
        ("1.5e12", 1.5e12),
        (".5", 0.5),
        ("2027-01-31", "2027-01-31"),
        ("2027-01-31T10:00:00Z", "2027-01-31T10:00:00Z"),
        ("12:30", "12:30"),
        ("0b101", "0b101"),
        ("~", None),
        ("null", None),
        ("Null", None),
        ("", None),
        ("'5'", "5"),
        ('"true"', "true"),
        ("671B", "671B"),
    ],
)
def test_yaml_12_core_resolution(scalar: str, value: object) -> None:
    loaded = data(f"a: {scalar}\n")["a"]
    assert loaded == value
    assert type(loaded) is type(value)


# --- positions --------------------------------------------------------------------------------


def test_positions_of_keys_and_values_are_one_based() -> None:
    text = (
        "apiVersion: dpguard/v1\n"
        "cluster:\n"
        "  gpus:   64\n"
        "  interconnect: {inter_node_gbps_per_gpu: 200}\n"
        "list:\n"
        "  - first\n"
        "  -   second\n"
    )
    doc = load_text(text, "m.yaml")
    assert doc.keys[("apiVersion",)] == Position(1, 1)
    assert doc.values[("apiVersion",)] == Position(1, 13)
    assert doc.keys[("cluster",)] == Position(2, 1)
    assert doc.values[("cluster",)] == Position(3, 3)
    assert doc.keys[("cluster", "gpus")] == Position(3, 3)
    assert doc.values[("cluster", "gpus")] == Position(3, 11)
    assert doc.keys[("cluster", "interconnect", "inter_node_gbps_per_gpu")] == Position(4, 18)
    assert doc.values[("cluster", "interconnect", "inter_node_gbps_per_gpu")] == Position(4, 43)
    assert doc.keys[("list", 0)] == Position(6, 5)
    assert doc.keys[("list", 1)] == Position(7, 7)


def test_position_falls_back_to_the_nearest_ancestor() -> None:
    doc = load_text("cluster:\n  gpus: 8\n", "m.yaml")
    assert doc.position(("cluster", "gpus")) == Position(2, 3)
    assert doc.position(("cluster", "missing", "deeper")) == Position(1, 1)
    assert doc.position(("nowhere",)) == Position(1, 1)
    assert doc.position(()) == Position(1, 1)
    assert doc.value_position(("cluster", "gpus")) == Position(2, 9)
    assert doc.value_position(("cluster", "nothing")) == Position(1, 1)


def test_source_doc_is_frozen() -> None:
    doc = load_text("a: 1\n", "m.yaml")
    assert isinstance(doc, SourceDoc)
    with pytest.raises(AttributeError):
        doc.name = "other"  # type: ignore[misc]


def test_load_file_names_the_document_by_its_path(write_manifest: Any) -> None:
    path = write_manifest("a: 1\n")
    assert load_file(str(path)).name == str(path)


# --- paths that cannot be read ----------------------------------------------------------------


def test_missing_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    with pytest.raises(InputError) as caught:
        load_file(str(missing))
    assert str(caught.value) == f"{missing}: no such file"


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(InputError) as caught:
        load_file(str(tmp_path))
    assert str(caught.value) == f"{tmp_path}: is a directory, not a file"


def test_dangling_symlink_is_a_missing_file(tmp_path: Path) -> None:
    link = tmp_path / "link.yaml"
    link.symlink_to(tmp_path / "gone.yaml")
    with pytest.raises(InputError) as caught:
        load_file(str(link))
    assert str(caught.value) == f"{link}: no such file"


def test_unreadable_name_is_an_input_error_not_a_crash(tmp_path: Path) -> None:
    name = str(tmp_path / ("x" * 5000))
    with pytest.raises(InputError) as caught:
        load_file(name)
    assert str(caught.value) == f"{name}: cannot be read (File name too long)"
