"""``jaxalloc trace``: reading MiniMalloc CSV traces, its error messages, the plan CSV and the chart."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxalloc.checks.checker import check_plan
from jaxalloc.cli import main
from jaxalloc.errors import TraceFormatError
from jaxalloc.reports.chart import PLAN_CSV_COLUMNS, plot_plan, write_plan_csv
from jaxalloc.traces import read_trace

TRACES = Path(__file__).resolve().parents[1] / "benchmarks" / "traces"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"

GOOD = """id,lower,upper,size
b1,0,3,4
b2,3,9,4
b3,0,9,4
b4,9,21,4
b5,0,21,4
"""


def write(tmp_path: Path, text: str, name: str = "trace.csv") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(["trace", *map(str, args)])
    out, err = capsys.readouterr()
    return code, out, err


def test_plans_a_trace_and_prints_the_summary(tmp_path, capsys):
    code, out, err = run(capsys, write(tmp_path, GOOD))
    assert code == 0 and err == ""
    fields = {line[:14].strip(): line[14:] for line in out.splitlines()}
    assert fields["allocator"] == "nnc"
    assert fields["buffers"] == "5"
    assert fields["lower bound"] == "12 B (max-live)"
    assert fields["peak"] == "12 B"
    assert fields["peak / bound"] == "1.0000"
    assert fields["total size"] == "20 B (every buffer in its own memory)"
    assert fields["footprint"] == "60.0% (peak / total)"
    assert fields["planning time"].endswith(" s")


def test_out_writes_the_rows_with_an_offset_column(tmp_path, capsys):
    out_path = tmp_path / "plan.csv"
    code, _, _ = run(capsys, write(tmp_path, GOOD), "--allocator", "greedy-size", "--alignment", "2", "--out", out_path)
    assert code == 0
    with open(out_path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert list(rows[0]) == ["id", "lower", "upper", "size", "offset"]
    assert [r["id"] for r in rows] == ["b1", "b2", "b3", "b4", "b5"]
    trace = read_trace(out_path)
    offsets = [int(r["offset"]) for r in rows]
    check_plan(trace.problem(alignment=2), offsets)


def test_best_names_the_winner(tmp_path, capsys):
    code, out, _ = run(capsys, write(tmp_path, GOOD), "--allocator", "best")
    assert code == 0
    assert "best (won by " in out


def test_plot_writes_a_png(tmp_path, capsys):
    png = tmp_path / "plan.png"
    code, _, _ = run(capsys, write(tmp_path, GOOD), "--plot", png)
    assert code == 0
    assert png.read_bytes().startswith(PNG_SIGNATURE)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", r"trace\.csv: empty file \(expected the header id,lower,upper,size\)"),
        ("\n\n", r"trace\.csv: empty file"),
        ("id,lower,upper\n1,0,1\n", r"trace\.csv:1: missing column size"),
        ("id,start,end,size\n1,0,1,1\n", r"trace\.csv:1: missing columns lower, upper"),
        ("id,lower,upper,size\n", r"trace\.csv:1: no buffers after the header"),
        ("id,lower,upper,size\n1,0,1,8\n2,x,3,8\n", r"trace\.csv:3: lower is not an integer: 'x'"),
        ("id,lower,upper,size\n1,0,1,8\n2,0,3,1.5\n", r"trace\.csv:3: size is not an integer: '1\.5'"),
        ("id,lower,upper,size\n1,0,1,0\n", r"trace\.csv:2: size must be positive, got 0"),
        ("id,lower,upper,size\n1,0,1,8\n2,0,1,-8\n", r"trace\.csv:3: size must be positive, got -8"),
        ("id,lower,upper,size\n1,0,1,8\n2,1,3,8\n3,5,5,8\n", r"trace\.csv:4: upper \(5\) must be greater than lower \(5\)"),
        ("id,lower,upper,size\n1,4,2,8\n", r"trace\.csv:2: upper \(2\) must be greater than lower \(4\)"),
        ("id,lower,upper,size\n7,0,1,8\n7,1,2,8\n", r"trace\.csv:3: duplicate id '7' \(first on line 2\)"),
        ("id,lower,upper,size\n1,0,1\n", r"trace\.csv:2: expected 4 fields, found 3"),
        ("id,lower,upper,size\n1,0,1,8,9\n", r"trace\.csv:2: expected 4 fields, found 5"),
        ("id,lower,lower,size\n1,0,1,8\n", r"trace\.csv:1: column 'lower' appears twice"),
        ("id,lower,upper,size\n,0,1,8\n", r"trace\.csv:2: empty id"),
        ("id,lower,upper,size\n1,0,1,99999999999999999999\n", r"trace\.csv:2: size 99999999999999999999 does not fit in 64 bits"),
    ],
)
def test_malformed_traces_name_file_and_line(tmp_path, capsys, text, message):
    path = write(tmp_path, text)
    with pytest.raises(TraceFormatError, match=message):
        read_trace(path)
    code, out, err = run(capsys, path)
    assert code == 2 and out == ""
    assert err.startswith("jaxalloc trace: error: ") and err.count("\n") == 1


def test_sizes_adding_up_past_int64_are_refused(tmp_path, capsys):
    big = 2**63 - 1
    code, out, err = run(capsys, write(tmp_path, f"id,lower,upper,size\na,0,2,{big}\nb,1,3,{big}\n"))
    assert code == 2 and out == ""
    assert err == f"jaxalloc trace: error: the buffers' sizes add up to {2 * big:,} bytes, past 2**63 - 1: a plan's addresses would not fit in 64 bits\n"


def test_line_numbers_count_blank_lines(tmp_path):
    with pytest.raises(TraceFormatError, match=r":5: size must be positive"):
        read_trace(write(tmp_path, "id,lower,upper,size\n1,0,1,8\n\n2,0,1,8\n3,0,1,0\n"))


def test_extra_columns_and_any_column_order_are_accepted(tmp_path):
    trace = read_trace(write(tmp_path, "size,upper,lower,id,offset\n8,2,0,a,0\n4,3,1,b,8\n"))
    assert trace.ids == ("a", "b")
    assert trace.lower.tolist() == [0, 1] and trace.upper.tolist() == [2, 3] and trace.size.tolist() == [8, 4]


def test_missing_file_is_a_trace_error(tmp_path, capsys):
    code, _, err = run(capsys, tmp_path / "nope.csv")
    assert code == 2 and "nope.csv: cannot read" in err


def test_unknown_allocator_and_bad_alignment(tmp_path, capsys):
    path = write(tmp_path, GOOD)
    code, _, err = run(capsys, path, "--allocator", "tlsf")
    assert code == 2 and "unknown allocator 'tlsf'; known allocators: nnc," in err
    code, _, err = run(capsys, path, "--alignment", "0")
    assert code == 2 and "alignment must be a positive integer number of bytes" in err


def test_console_script_runs(tmp_path):
    path = write(tmp_path, GOOD)
    done = subprocess.run(
        [sys.executable, "-m", "jaxalloc.cli", "trace", str(path), "--allocator", "beam"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "peak / bound  1.0000" in done.stdout


def test_plan_csv_export_columns(tmp_path):
    path = tmp_path / "plan.csv"
    write_plan_csv(path, names=["x", "y"], sizes=[8, 4], offsets=[0, 8], starts=[0, 1], ends=[2, 3])
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    assert tuple(rows[0]) == PLAN_CSV_COLUMNS == ("tensor_name", "size", "offset", "start_time", "end_time")
    assert rows[1:] == [["x", "8", "0", "0", "2"], ["y", "4", "8", "1", "3"]]


def chart_inputs(n: int, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, max(n // 4, 5), n)
    return {
        "names": [f"t{i}" for i in range(n)],
        "sizes": rng.integers(1, 1 << 20, n),
        "offsets": rng.integers(0, 1 << 24, n),
        "starts": starts,
        "ends": starts + rng.integers(1, 30, n),
    }


@pytest.mark.parametrize("n", [20, 20_000])
def test_chart_is_written_for_few_and_many_buffers(tmp_path, n):
    png = tmp_path / f"gantt{n}.png"
    data = chart_inputs(n)
    peak = int((data["offsets"] + data["sizes"]).max())
    plot_plan(png, **data, peak=peak, bound=peak // 2, title=f"{n} buffers")
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert png.stat().st_size > 10_000


def test_real_traces_are_read():
    resnet = TRACES / "somas" / "resnet50.csv"
    toy = TRACES / "minimalloc" / "input.12.csv"
    assert len(read_trace(resnet).ids) == 1042
    assert read_trace(toy).ids == ("b1", "b2", "b3", "b4", "b5")
