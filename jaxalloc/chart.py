"""Pictures and tables of a plan: a Gantt chart (time on x, address on y) and a CSV export.

Both take plain arrays (names, sizes, offsets, half-open lifetimes ``[start, end)``) so that lifetime
traces and jaxpr plans share them. The chart draws every buffer as one rectangle of a single
``PolyCollection``, which stays fast and readable from 20 to tens of thousands of buffers: neighbours
get different colours, outlines are drawn up to a few thousand buffers, and names are written inside
the rectangles only when there are few. The peak and the lower bound are horizontal
lines, so the gap between them is visible at a glance.
"""

from __future__ import annotations

import csv
from collections.abc import Sequence

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter

LABEL_LIMIT = 40
OUTLINE_LIMIT = 3000
PLAN_CSV_COLUMNS = ("tensor_name", "size", "offset", "start_time", "end_time")


def format_bytes(value: float, _position=None) -> str:
    """``1536`` -> ``'1.5 KiB'``: binary units, as memory is sized."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.3g} {unit}"
        value /= 1024
    return f"{value:.3g} GiB"


def plot_plan(
    path: str,
    *,
    names: Sequence[str],
    sizes,
    offsets,
    starts,
    ends,
    peak: int,
    bound: int | None = None,
    title: str | None = None,
) -> None:
    """Writes a Gantt chart of a plan to ``path`` (PNG, or any format matplotlib infers from the name)."""
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
            verts,
            facecolors=matplotlib.colormaps["tab20"](np.arange(n) % 20),
            edgecolors="black" if outlined else "none",
            linewidths=(0.6 if few else 0.25) if outlined else 0.0,
            rasterized=not few,
        )
    )
    if few:
        for name, s, e, o, z in zip(names, starts, ends, offsets, sizes):
            axes.text((s + e) / 2, o + z / 2, str(name), ha="center", va="center", fontsize=8, clip_on=True)
    axes.axhline(peak, color="crimson", linestyle="--", linewidth=1.2, label=f"peak {format_bytes(peak)}")
    if bound is not None:
        axes.axhline(bound, color="seagreen", linestyle=":", linewidth=1.5, label=f"lower bound {format_bytes(bound)}")
    low = int(starts.min()) if n else 0
    high = int(ends.max()) if n else 1
    axes.set_xlim(low, max(high, low + 1))
    axes.set_ylim(0, max(peak, bound or 0, 1) * 1.06)
    axes.yaxis.set_major_formatter(FuncFormatter(format_bytes))
    axes.set_xlabel("time (schedule step)")
    axes.set_ylabel("address")
    summary = f"{n:,} buffers, peak {format_bytes(peak)}"
    if bound:
        summary += f", bound {format_bytes(bound)} (peak / bound {peak / bound:.4f})"
    axes.set_title(f"{title}\n{summary}" if title else summary, fontsize=10)
    axes.legend(loc="upper right", fontsize=8)
    figure.savefig(path)


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
