"""Reports a person reads: `Plan.report()`, source-line labels, the labelled Gantt chart, `jaxalloc plan`."""

from __future__ import annotations

import inspect
import io
import os
from pathlib import Path

import jax
import jax.numpy as jnp
import matplotlib
import pytest
from xdsl.printer import Printer

import jaxalloc
from jaxalloc.cli import main
from jaxalloc.frontend.labels import value_label
from jaxalloc.planning.plan import _ir_namer
from jaxalloc.reports.chart import plot_plan
from jaxalloc.testing.differential import AS_TRACED

HERE = os.path.basename(__file__)


def block(x, w1, w2):
    h = jnp.tanh(x @ w1)  # LINE_H
    y = h @ w2  # LINE_Y
    return jnp.exp(y).sum()


def looped(x, ws):
    def body(c, w):
        return jnp.sin(c @ w), None  # LINE_BODY

    c, _ = jax.lax.scan(body, x, ws)  # LINE_SCAN
    return c


def line_of(fn, marker: str) -> int:
    source, first = inspect.getsourcelines(fn)
    return first + next(i for i, text in enumerate(source) if marker in text)


ARGS = (jnp.ones((64, 32)), jnp.ones((32, 256)), jnp.ones((256, 16)))


@pytest.fixture(scope="module")
def plan() -> jaxalloc.Plan:
    """Every value in the arena: the plan a compiled call runs leaves the matrix products' to XLA."""
    return jaxalloc.planned(block).plan(*ARGS, include_outputs=True)


def test_rows_name_primitive_and_source_line(plan):
    labels = {r.name: r.label for r in plan.buffers}
    assert f"dot_general {HERE}:{line_of(block, 'LINE_H')}" in labels.values()
    assert f"dot_general {HERE}:{line_of(block, 'LINE_Y')}" in labels.values()
    assert all(label for label in labels.values())


def test_source_lines_stay_out_of_the_ir():
    text = str(jaxalloc.planned(block).lower(*ARGS))
    assert "loc(" not in text and HERE not in text


def test_loop_values_get_the_body_line_and_glue_the_loop_line():
    module = jaxalloc.planned(looped).lower(jnp.ones((8, 8)), jnp.ones((3, 8, 8)))
    labels = {value_label(r) for op in module.walk() for r in op.results}
    assert f"sin {HERE}:{line_of(looped, 'LINE_BODY')}" in labels
    assert f"while {HERE}:{line_of(looped, 'LINE_SCAN')}" in labels
    assert f"dynamic_slice {HERE}:{line_of(looped, 'LINE_SCAN')}" in labels  # the scan's xs[i], not jaxalloc's own line
    assert not any("convert.py" in label or "api.py" in label for label in labels)


def test_report_has_peak_bound_and_largest_buffers(plan):
    text = plan.report(top=3)
    assert text.startswith("block (nnc, 64 B alignment): arena ")
    assert f"arena / bound {plan.arena_bytes / plan.lower_bound:.4f}" in text
    live = plan.live_bytes()
    step = int(live.argmax())
    assert int(live.max()) == plan.lower_bound
    assert f"at step {step} ({plan.schedule[step]})" in text
    assert "largest buffers:" in text and "defined by" in text
    biggest = max(plan.buffers, key=lambda r: r.size)
    assert biggest.label in text and f"{biggest.offset:,}" in text


def test_schedule_has_one_label_per_step(plan):
    assert len(plan.schedule) == max(r.end for r in plan.buffers)  # the output lives to the last step, the yield
    assert plan.schedule[-1] == "yield"


def test_chart_labels_the_largest_buffers_with_their_source(plan, tmp_path: Path):
    matplotlib.rcParams["svg.fonttype"] = "none"  # text as text, so the test can read it
    try:
        path = tmp_path / "plan.svg"
        plan.plot(path)
        svg = path.read_text()
    finally:
        matplotlib.rcParams["svg.fonttype"] = "path"
    biggest = max(plan.buffers, key=lambda r: r.size)
    assert biggest.label.split()[0] in svg and HERE in svg


def test_chart_labels_only_the_largest_when_there_are_many(tmp_path: Path):
    n = 200
    sizes = [1000 if i == 7 else 10 for i in range(n)]
    offsets = [0 if i == 7 else 1000 + 10 * i for i in range(n)]
    matplotlib.rcParams["svg.fonttype"] = "none"
    try:
        path = tmp_path / "many.svg"
        plot_plan(
            str(path), names=[f"b{i}" for i in range(n)], sizes=sizes, offsets=offsets,
            starts=[0] * n, ends=[10] * n, peak=3000, labels=[f"op{i} file.py:{i}" for i in range(n)],
        )
        svg = path.read_text()
    finally:
        matplotlib.rcParams["svg.fonttype"] = "path"
    assert "op7 file.py:7" in svg
    assert "op150 file.py:150" not in svg


def test_plan_command_prints_report_and_writes_files(tmp_path: Path, capsys):
    model = tmp_path / "model.py"
    model.write_text("import jax\nimport jax.numpy as jnp\n\n" + inspect.getsource(block))
    png, csv = tmp_path / "plan.png", tmp_path / "plan.csv"
    code = main(["plan", f"{model}:block", "f32[64,32]", "f32[32,256]", "f32[256,16]", "--include-outputs",
                 "--plot", str(png), "--out", str(csv), "--top", "2"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "block (nnc, 64 B alignment): arena" in out and "dot_general model.py:5" in out
    assert png.read_bytes().startswith(b"\x89PNG") and csv.read_text().startswith("tensor_name,size,offset")


def test_plan_command_rejects_unknown_allocator(tmp_path: Path, capsys):
    model = tmp_path / "model.py"
    model.write_text("import jax.numpy as jnp\n\n" + inspect.getsource(block))
    code = main(["plan", f"{model}:block", "f32[64,32]", "f32[32,256]", "f32[256,16]", "--allocator", "nope"])
    assert code == 2 and "unknown allocator 'nope'" in capsys.readouterr().err


def test_rows_are_named_as_the_ir_names_their_values(tmp_path: Path):
    def step(x, w):
        def body(c, wi):
            return jnp.tanh(c @ wi), c.sum()

        return jax.lax.scan(body, jnp.cos(jnp.sin(x)), w)

    plan = jaxalloc.planned(step).plan(jnp.ones((8, 32)), jnp.ones((4, 32, 32)))
    names = [r.name for r in plan.buffers]
    assert len(set(names)) == len(names)  # ring slots get their index, the loop counter its number
    ir = str(plan.module)
    for r in plan.buffers:
        base, _, slot = r.name.partition("[")
        assert f"%{base} = " in ir or f"%{base}, " in ir, r.name
        assert (r.repeat == 1) == (slot == "")
    printed, namer = Printer(stream=io.StringIO()), _ir_namer(plan.module)
    printed.print_op(plan.module)
    ops = list(plan.module.walk())
    values = [v for op in ops for v in op.results] + [a for op in ops for r in op.regions for b in r.blocks for a in b.args]
    assert [printed.print_ssa_value(v) for v in values] == [namer.print_ssa_value(v) for v in values]
    ring = [n for n, r in zip(names, plan.buffers) if r.repeat == 2]
    assert [n[-5:] for n in ring] == ["[0/2]", "[1/2]"]
    plan.to_csv(tmp_path / "plan.csv")
    assert ring[0] in (tmp_path / "plan.csv").read_text()


def test_report_has_onnc_figures(plan):
    total = sum(r.size for r in plan.buffers)
    assert plan.total_bytes == total
    assert f"footprint {plan.arena_bytes / total:.1%} (arena / total)" in plan.report()


def test_short_plans_read_well():
    one = jaxalloc.planned(lambda x: jnp.sin(x).sum(), passes=AS_TRACED).plan(jnp.ones(160))
    text = one.report()
    assert "1 buffer on a 2-step schedule" in text and "1 buffer live:" in text
    assert text.count("defined by") == 1 and text.endswith("largest buffers: those above (every buffer is live at max-live)")
    assert str(one) == (
        "<lambda> (nnc, 64 B alignment): arena 640 B for 1 buffer, lower bound 640 B, total 640 B "
        "(plan.report() for details, plan.module for the planned IR)"
    )
    assert "jx.func" not in repr(one)
    empty = jaxalloc.planned(jnp.sin).plan(jnp.ones(4)).report()
    assert "nothing to plan; plan(..., include_outputs=True) plans every computed value in the arena" in empty
    with pytest.raises(jaxalloc.JaxallocError, match="top must be a positive number of rows per table, got 0"):
        one.report(top=0)


@pytest.mark.parametrize("top", ["0", "-3"])
def test_plan_command_refuses_top_below_one(top, capsys):
    assert main(["plan", "no_module_needed:f", "f32[4]", "--top", top]) == 2
    assert capsys.readouterr().err == f"jaxalloc plan: error: top must be a positive number of rows per table, got {top}\n"


def test_chart_ticks_legend_and_nearly_equal_peak_and_bound():
    from jaxalloc.reports.chart import draw_plan

    mib = 2**20
    peak = 200 * mib
    figure = draw_plan(
        names=["a", "b"], sizes=[120 * mib, 80 * mib], offsets=[0, 120 * mib], starts=[0, 0], ends=[4, 4],
        peak=peak, bound=peak - 64, title="near",
    )
    figure.canvas.draw()
    axes = figure.axes[0]
    ticks = [t for t in axes.get_yticks() if 0 <= t <= axes.get_ylim()[1]]
    labels = [t.get_text() for t in axes.get_yticklabels() if 0 <= t.get_position()[1] <= axes.get_ylim()[1]]
    assert ticks[1] - ticks[0] == 32 * mib and labels[:3] == ["0 B", "32 MiB", "64 MiB"]
    renderer = figure.canvas.get_renderer()
    assert axes.get_legend().get_window_extent(renderer).y1 <= axes.get_window_extent(renderer).y0
    named = {t.get_text(): t.get_window_extent(renderer) for t in axes.texts if t.get_text() in ("peak", "lower bound")}
    assert named["peak"].y0 >= named["lower bound"].y1  # apart though 64 B apart
