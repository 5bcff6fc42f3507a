"""`dpguard bubble` and `dpguard compare`, run in-process through `dpguard.cli.main`."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from dpguard.cli import main
from dpguard.schedules import OpTimes, simulate
from dpguard.schedules.render import svg_timeline, text_timeline

GOLDEN = Path(__file__).parent / "golden"
README_TIMES = ["--forward", "1", "--backward", "2", "--weight", "1", "--overlapped", "3"]
SVG = "{http://www.w3.org/2000/svg}"


@pytest.mark.parametrize(
    ("schedule", "ranks", "microbatches", "golden"),
    [("dualpipe", 8, 20, "dualpipe_8x20.txt"), ("dualpipev", 4, 10, "dualpipev_4x10.txt")],
)
def test_timeline_matches_the_hand_built_readme_grid(schedule, ranks, microbatches, golden):
    """The golden grids were built by hand from the 8-step structure (schedules.md s3) at
    F = I = W = 1, B = 2, F&B = 3: DualPipeV 4 x 10 op by op, and DualPipe 8 x 20 as its
    ranks 0-3 equal to DualPipeV's devices and ranks 4-7 their mirror images with the two
    directions swapped (upper/lower case exchanged)."""
    expected = (GOLDEN / golden).read_text()
    result = simulate(schedule, ranks, microbatches, OpTimes(1, 2, 1, 3))
    assert result.makespan == 66
    assert text_timeline(result) == expected


def test_bubble_timeline_prints_the_golden_grid(capsys):
    args = ["bubble", "-s", "dualpipe", "-p", "8", "-m", "20", *README_TIMES, "--timeline"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.endswith((GOLDEN / "dualpipe_8x20.txt").read_text())
    assert "makespan          66\n" in out


def test_bubble_text_summary(capsys):
    assert main(["bubble", "--schedule", "dualpipe", "--ranks", "8", "--microbatches", "16",
                 "--overlapped", "2.5"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "makespan          49\n" in out
    assert "bubble fraction   8.4184%" in out
    assert "idle per rank     3.5 4 4.5 4.5 4.5 4.5 4 3.5\n" in out
    assert "peak activations  9 9 9 9 9 9 9 9\n" in out
    assert "closed form       4.5 = (PP/2-1)(F&B+B-3W), PP = P\n" in out
    assert "idle time of the worst device (the middle ranks)" in out
    assert "exact for these inputs" in out


def test_bubble_json_carries_the_contract_fields(capsys):
    assert main(["bubble", "-s", "dualpipev", "-p", "8", "-m", "16", "--fb", "2.5",
                 "--format", "json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    for key in [
        "schedule",
        "ranks",
        "stages",
        "microbatches",
        "makespan",
        "bubble_fraction",
        "idle_per_rank",
        "peak_activations_per_rank",
        "p2p_messages",
        "closed_form_bubble",
        "closed_form_exact",
    ]:
        assert key in data, key
    assert data["schedule"] == "dualpipev" and data["stages"] == 16
    assert data["makespan"] == 99 and data["closed_form_bubble"] == 10.5
    assert data["closed_form_exact"] is True
    assert data["bubble_fraction"] == pytest.approx(0.092803, abs=5e-7)
    assert data["peak_activations_per_rank"] == [17] * 8
    assert data["p2p_messages"] == 2 * 16 * 14
    assert data["exact"]["makespan"] == "99"
    assert data["op_times"] == {
        "forward": 1.0,
        "backward": 2.0,
        "weight": 1.0,
        "input": 1.0,
        "overlapped": 2.5,
    }


def test_bubble_json_flags_an_inexact_closed_form(capsys):
    assert main(["bubble", "-s", "dualpipe", "-p", "8", "-m", "32", "-F", "2", "-B", "2",
                 "-W", "1", "--fb", "3", "--format", "json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["closed_form_exact"] is False
    assert data["closed_form_bubble"] == 6 and max(data["idle_per_rank"]) == 9
    assert "worst device" in data["closed_form_label"]


def test_bubble_json_output_is_sorted_and_stable(capsys):
    args = ["bubble", "-s", "zb1p", "-p", "4", "-m", "8", "--format", "json"]
    main(args)
    first = capsys.readouterr().out
    main(args)
    assert capsys.readouterr().out == first
    assert first == json.dumps(json.loads(first), indent=2, sort_keys=True) + "\n"


def test_bubble_violations_exit_2_one_line_each(capsys):
    code = main(["bubble", "-s", "dualpipe", "-p", "5", "-m", "9", "-W", "3"])
    assert code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 4
    assert lines[0].startswith("dpguard: error: dualpipe needs an even number of ranks (got 5)")
    assert "even number of micro-batches" in lines[1]
    assert "2 x ranks = 10" in lines[2]
    assert "W (3) must be less than the full backward B (2)" in lines[3]


@pytest.mark.parametrize(
    "args",
    [
        ["bubble", "-s", "nope", "-p", "4", "-m", "8"],
        ["bubble", "-s", "gpipe", "-p", "4", "-m", "8", "-F", "fast"],
        ["bubble", "-s", "gpipe", "-p", "4"],
    ],
)
def test_bubble_usage_errors_exit_2(args, capsys):
    assert main(args) == 2
    assert "usage:" in capsys.readouterr().err


def test_bubble_interleaved_defaults_to_two_chunks(capsys):
    assert main(["bubble", "-s", "interleaved-1f1b", "-p", "4", "-m", "8", "--format",
                 "json"]) == 0  # fmt: skip
    data = json.loads(capsys.readouterr().out)
    assert data["virtual_stages"] == 2 and data["stages"] == 8
    assert data["idle_per_rank"] == [9.0] * 4


def test_bubble_writes_a_well_formed_deterministic_svg(tmp_path, capsys):
    target = tmp_path / "dp.svg"
    args = ["bubble", "-s", "dualpipe", "-p", "8", "-m", "20", *README_TIMES, "--svg", str(target)]
    assert main(args) == 0
    first = target.read_bytes()
    root = ET.fromstring(first)
    assert root.tag == f"{SVG}svg"
    pairs = root.findall(f".//{SVG}g[@class='pair']")
    assert len(pairs) == sum(
        op.kind == "FB" for o in simulate("dualpipe", 8, 20).timeline.orders for op in o
    )
    texts = "".join(t.text or "" for t in root.iter(f"{SVG}text"))
    assert "rank 7" in texts and "forward" in texts and "overlapped F&B pair" in texts
    assert main(args) == 0
    assert target.read_bytes() == first  # deterministic
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dp.svg"]  # no temp files left
    capsys.readouterr()


def test_svg_has_one_row_per_rank_and_ops_inside_the_plot():
    result = simulate("zb1p", 4, 8)
    root = ET.fromstring(svg_timeline(result, width=600))
    ranks = [t.text for t in root.iter(f"{SVG}text") if (t.text or "").startswith("rank ")]
    assert ranks == [f"rank {r}" for r in range(4)]
    ops = [rect for g in root.iter(f"{SVG}g") for rect in g.iter(f"{SVG}rect")]
    assert len(ops) == result.events
    for rect in ops:
        x, w = float(rect.get("x", 0)), float(rect.get("width", 0))
        assert x >= 64 and x + w <= 64 + 600 + 0.01
    assert float(root.get("width", 0)) >= 64 + 600


def test_text_timeline_refuses_absurd_widths():
    from dpguard.errors import UsageError

    with pytest.raises(UsageError, match="--svg"):
        text_timeline(simulate("gpipe", 2, 3000))


def test_compare_sorts_by_makespan_and_lists_invalid_schedules(capsys):
    assert main(["compare", "-p", "5", "-m", "9"]) == 0
    out = capsys.readouterr().out
    names = [line.split()[0] for line in out.splitlines()[3:] if line and line[0] != " "]
    assert names[:4] == ["zb1p", "interleaved-1f1b", "gpipe", "1f1b"]
    assert "dualpipe          not valid here: dualpipe needs an even number of ranks" in out
    assert "dualpipev         not valid here: dualpipev needs micro-batches >= 2 x ranks" in out


def test_compare_json_puts_schedules_on_the_same_model(capsys):
    assert main(["compare", "-p", "8", "-m", "32", "--fb", "3", "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    rows = {row["schedule"]: row for row in data["schedules"]}
    assert [row["schedule"] for row in data["schedules"]][:2] == ["dualpipe", "zb1p"]
    spans = [row["makespan"] for row in data["schedules"]]
    assert spans == sorted(spans)
    assert rows["dualpipev"]["op_times"]["forward"] == 0.5  # chunks of half a 1F1B stage
    assert rows["interleaved-1f1b"]["op_times"]["forward"] == 0.5
    assert rows["dualpipe"]["param_copies"] == 2 and rows["dualpipev"]["param_copies"] == 1
    assert rows["dualpipev"]["activation_memory"] == 8.5  # (2N+1) chunks of half a stage
    assert rows["gpipe"]["activation_memory"] == 32
    assert all(row["valid"] for row in data["schedules"])


def test_compare_invalid_op_times_exit_2(capsys):
    assert main(["compare", "-p", "4", "-m", "8", "--fb", "9"]) == 2
    assert "F&B (9) must lie in [max(F, B), F + B]" in capsys.readouterr().err


def test_svg_to_an_unwritable_place_exits_2(tmp_path, capsys):
    missing = tmp_path / "no-such-dir" / "x.svg"
    assert main(["bubble", "-s", "gpipe", "-p", "2", "-m", "2", "--svg", str(missing)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert main(["bubble", "-s", "gpipe", "-p", "2", "-m", "2", "--svg", str(tmp_path)]) == 2
    assert "cannot write" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []  # the temp file was removed
