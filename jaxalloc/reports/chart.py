"""Pictures and tables of a plan: a Gantt chart (time on x, address on y) and a CSV export.

Both take plain arrays (names, sizes, offsets, half-open lifetimes ``[start, end)``) so that lifetime
traces and jaxpr plans share them. The chart draws every buffer as one rectangle of a single
``PolyCollection``, which stays fast and readable from 20 to tens of thousands of buffers: neighbours
get different colours, outlines are drawn up to a few thousand buffers, and labels (the name, and
where given what defines the buffer) are written inside the rectangles of every buffer when there
are few, else of the largest ones, wherever the text fits (across, on two lines, or upright). The
peak and the lower bound are horizontal lines named at the right edge (apart even when they nearly
coincide), the legend sits below the axes, and addresses are ticked at power-of-two steps.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from jaxalloc.reports.text import binary_label, format_size

if TYPE_CHECKING:
    from matplotlib.figure import Figure

LABEL_LIMIT = 40
LARGEST_LABELLED = 12
OUTLINE_LIMIT = 3000
PLAN_CSV_COLUMNS = ("tensor_name", "size", "offset", "start_time", "end_time")


def plot_plan(path: str, **chart) -> None:
    """Writes a Gantt chart of a plan to ``path`` (PNG, or any format matplotlib infers from the name);
    the keywords are those of `draw_plan`."""
    draw_plan(**chart).savefig(path)


def draw_plan(
    *,
    names: Sequence[str],
    sizes,
    offsets,
    starts,
    ends,
    peak: int,
    bound: int | None = None,
    title: str | None = None,
    labels: Sequence[str] | None = None,
) -> Figure:
    """A Gantt chart of a plan: time on x, address on y, peak and bound as lines named at the right.

    ``labels`` (one per buffer, e.g. the primitive and source line that define it) are written after
    the names of the labelled buffers: all of them when there are at most ``LABEL_LIMIT``, else the
    ``LARGEST_LABELLED`` largest.
    """
    # here, not at the top: matplotlib takes a third of a second to load, and only a chart needs it
    import matplotlib
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.collections import PolyCollection
    from matplotlib.figure import Figure
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    sizes, offsets = np.asarray(sizes, np.int64), np.asarray(offsets, np.int64)
    starts, ends = np.asarray(starts, np.int64), np.asarray(ends, np.int64)
    n = len(sizes)
    figure = Figure(figsize=(11, 6.5), dpi=110, layout="constrained")
    FigureCanvasAgg(figure)
    axes = figure.add_subplot()
    few = n <= LABEL_LIMIT
    verts = _rectangles(starts, ends, offsets, offsets + sizes)
    outlined = n <= OUTLINE_LIMIT
    axes.add_collection(
        PolyCollection(
            list(verts),
            facecolors=matplotlib.colormaps["tab20"](np.arange(n) % 20),
            edgecolors="black" if outlined else "none",
            linewidths=(0.6 if few else 0.25) if outlined else 0.0,
            rasterized=not few,
        )
    )
    _line(axes, peak, "peak", "crimson", "--", above=True)
    if bound is not None:
        _line(axes, bound, "lower bound", "seagreen", ":", above=False)
    low = int(starts.min()) if n else 0
    high = int(ends.max()) if n else 1
    axes.set_xlim(low, max(high, low + 1))
    axes.set_ylim(0, max(peak, bound or 0, 1) * 1.06)
    _label(figure, axes, names, labels, starts, ends, offsets, sizes, every=few)
    axes.yaxis.set_major_locator(MultipleLocator(binary_step(axes.get_ylim()[1])))
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _position: binary_label(value)))
    axes.set_xlabel("time (schedule step)")
    axes.set_ylabel("address")
    summary = f"{n:,} buffers, peak {format_size(peak)}"
    if bound:
        summary += f", bound {format_size(bound)} (peak / bound {peak / bound:.4f})"
    axes.set_title(f"{title}\n{summary}" if title else summary, fontsize=10)
    axes.legend(loc="upper center", bbox_to_anchor=(0.5, -0.09), ncols=2, fontsize=8)  # below the axes, not on the buffers
    return figure


def _line(axes, y: int, name: str, color: str, style: str, above: bool) -> None:
    """A horizontal line named at the right edge, the peak's name above its line and the bound's below,
    so the two stay apart when they nearly coincide."""
    axes.axhline(y, color=color, linestyle=style, linewidth=1.4, label=f"{name} {format_size(y)} ({y:,} B)")
    axes.annotate(
        name, xy=(1.0, y), xycoords=("axes fraction", "data"), xytext=(3, 2 if above else -2),
        textcoords="offset points", va="bottom" if above else "top", color=color, fontsize=8,
    )


def binary_step(top: float) -> int:
    """A tick step of a power of two bytes giving 4 to 8 ticks up to ``top``: 32 MiB, not 47.68 MiB."""
    return 2 ** max(0, math.floor(math.log2(max(top, 1) / 4)))


def _label(figure, axes, names, labels, starts, ends, offsets, sizes, every: bool) -> None:
    """Writes the label of each chosen buffer inside its rectangle, in the first form that fits."""
    if not len(sizes):
        return
    chosen = range(len(sizes)) if every else np.lexsort((starts - ends, -sizes))[:LARGEST_LABELLED]
    (x0, x1), (y0, y1) = axes.get_xlim(), axes.get_ylim()
    width_in, height_in = figure.get_size_inches()
    # points per data unit, for an axes that takes about 85 % of the figure
    x_scale, y_scale = 0.85 * width_in * 72 / (x1 - x0), 0.8 * height_in * 72 / (y1 - y0)
    for i in chosen:
        box_w, box_h = (ends[i] - starts[i]) * x_scale, sizes[i] * y_scale
        name = str(names[i])
        texts = [f"{name}: {labels[i]}", f"{name}\n{labels[i]}"] if labels is not None and labels[i] else []
        for text, size, rotation in _forms(texts + [name]):
            lines = text.split("\n")
            along, across = max(len(line) for line in lines) * size * 0.6, len(lines) * size * 1.25
            if rotation:
                along, across = across, along
            if along <= box_w and across <= box_h:
                axes.text(
                    (starts[i] + ends[i]) / 2, offsets[i] + sizes[i] / 2, text,
                    ha="center", va="center", fontsize=size, rotation=rotation, clip_on=True,
                )
                break


def _forms(texts: list[str]):
    """Candidate renderings, most informative first: the labels at 8 pt, at 6 pt, upright, then the name."""
    *labelled, name = texts
    for size in (8, 6):
        for text in labelled:
            yield text, size, 0
    for text in labelled:
        if "\n" not in text:
            yield text, 6, 90
    for size in (8, 6):
        yield name, size, 0
    yield name, 6, 90


def _rectangles(x0, x1, y0, y1) -> np.ndarray:
    """Corners ``(n, 4, 2)`` of axis-aligned rectangles, for one PolyCollection."""
    xs = np.stack([x0, x1, x1, x0], axis=1).astype(float)
    ys = np.stack([y0, y0, y1, y1], axis=1).astype(float)
    return np.stack([xs, ys], axis=2)


def write_plan_csv(path: str, *, names: Sequence[str], sizes, offsets, starts, ends) -> None:
    """Writes one row per buffer: ``tensor_name,size,offset,start_time,end_time`` (half-open times)."""
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(PLAN_CSV_COLUMNS)
        for row in zip(names, sizes, offsets, starts, ends):
            writer.writerow([row[0], *(int(v) for v in row[1:])])
