"""Lifetime traces in the MiniMalloc CSV format, and the ``jaxalloc trace`` command.

A trace has one row per buffer: ``id,lower,upper,size`` with the half-open lifetime ``[lower,
upper)`` and a positive byte size (MiniMalloc's and idealloc's benchmark format; other columns, such
as the ``offset`` of a solution, are ignored). Malformed files raise :class:`TraceFormatError` naming
the file and the line, as ``FILE:LINE: what is wrong``.
"""

from __future__ import annotations

import csv
import inspect
import os
import time
from dataclasses import dataclass

import numpy as np

from jaxalloc.allocators import allocate, get_allocator
from jaxalloc.allocators.bound import lower_bound
from jaxalloc.allocators.problem import Problem
from jaxalloc.errors import JaxallocError, TraceFormatError, check_alignment

COLUMNS = ("id", "lower", "upper", "size")
INT64_MAX = 2**63 - 1


@dataclass(frozen=True, eq=False)
class Trace:
    """The buffers of a trace, in file order."""

    ids: tuple[str, ...]
    lower: np.ndarray
    upper: np.ndarray
    size: np.ndarray

    def problem(self, alignment: int = 1) -> Problem:
        """The plain allocation problem of the trace: interval conflicts only. Its padded sizes must add
        up to an int64, so that no plan's addresses overflow."""
        total = sum(-(-int(size) // alignment) * alignment for size in self.size)
        if total > INT64_MAX:
            raise TraceFormatError(
                f"the buffers' sizes add up to {total:,} bytes, past 2**63 - 1: a plan's addresses would not "
                "fit in 64 bits"
            )
        return Problem.from_intervals(self.size, self.lower, self.upper, alignment=alignment, names=self.ids)


def read_trace(path: str | os.PathLike) -> Trace:
    """Reads and validates a MiniMalloc CSV trace."""
    name = os.fspath(path)
    try:
        with open(name, newline="", encoding="utf-8-sig") as handle:
            return _parse(name, handle)
    except OSError as e:
        raise TraceFormatError(f"{name}: cannot read: {e.strerror}") from None
    except UnicodeDecodeError:
        raise TraceFormatError(f"{name}: not a text file (invalid UTF-8)") from None


def _parse(name: str, handle) -> Trace:
    reader = csv.reader(handle)
    try:
        return _parse_rows(name, reader)
    except csv.Error as e:
        raise TraceFormatError(f"{name}:{reader.line_num}: {e}") from None


def _parse_rows(name: str, reader) -> Trace:
    header = next((row for row in reader if any(cell.strip() for cell in row)), None)
    if header is None:
        raise TraceFormatError(f"{name}: empty file (expected the header {','.join(COLUMNS)})")
    header_line = reader.line_num
    where = _columns(name, header_line, [cell.strip() for cell in header])
    ids: list[str] = []
    values: list[tuple[int, int, int]] = []
    first_line: dict[str, int] = {}
    for row in reader:
        if not any(cell.strip() for cell in row):
            continue
        line = reader.line_num
        if len(row) != len(header):
            raise TraceFormatError(f"{name}:{line}: expected {len(header)} fields, found {len(row)}")
        ident = row[where["id"]].strip()
        if not ident:
            raise TraceFormatError(f"{name}:{line}: empty id")
        lower, upper, size = (_integer(name, line, column, row[where[column]]) for column in COLUMNS[1:])
        if size <= 0:
            raise TraceFormatError(f"{name}:{line}: size must be positive, got {size}")
        if upper <= lower:
            raise TraceFormatError(f"{name}:{line}: upper ({upper}) must be greater than lower ({lower})")
        if ident in first_line:
            raise TraceFormatError(f"{name}:{line}: duplicate id {ident!r} (first on line {first_line[ident]})")
        first_line[ident] = line
        ids.append(ident)
        values.append((lower, upper, size))
    if not ids:
        raise TraceFormatError(f"{name}:{header_line}: no buffers after the header")
    array = np.array(values, np.int64)
    return Trace(tuple(ids), array[:, 0], array[:, 1], array[:, 2])


def _columns(name: str, line: int, header: list[str]) -> dict[str, int]:
    duplicated = sorted({c for c in header if header.count(c) > 1})
    if duplicated:
        raise TraceFormatError(f"{name}:{line}: column {duplicated[0]!r} appears twice in the header")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise TraceFormatError(
            f"{name}:{line}: missing column{'s' if len(missing) > 1 else ''} "
            f"{', '.join(missing)} (the header must name {','.join(COLUMNS)})"
        )
    return {c: header.index(c) for c in COLUMNS}


def _integer(name: str, line: int, column: str, text: str) -> int:
    try:
        value = int(text.strip())
    except ValueError:
        raise TraceFormatError(f"{name}:{line}: {column} is not an integer: {text!r}") from None
    if abs(value) > INT64_MAX:
        raise TraceFormatError(f"{name}:{line}: {column} {value} does not fit in 64 bits")
    return value


def _allocator_options(ns) -> dict:
    """The options the command line passes to the allocator: ``--time-limit`` where it takes one."""
    run = get_allocator(ns.allocator)
    limit = getattr(ns, "time_limit", None)
    if limit is None:
        return {}
    if "time_limit" not in inspect.signature(run).parameters:
        raise JaxallocError(f"--time-limit applies to allocators that search (search), not to {ns.allocator!r}")
    if not limit > 0:
        raise JaxallocError(f"--time-limit must be a positive number of seconds, got {limit:g}")
    return {"time_limit": limit}


def write_plan(path: str | os.PathLike, trace: Trace, offsets) -> None:
    """Writes the trace's rows with an ``offset`` column: ``id,lower,upper,size,offset``."""
    with open(path, "w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow([*COLUMNS, "offset"])
        for row in zip(trace.ids, trace.lower, trace.upper, trace.size, offsets):
            writer.writerow([row[0], *(int(v) for v in row[1:])])


def run_trace_command(ns) -> None:
    """``jaxalloc trace FILE.csv [--allocator NAME] [--alignment N] [--time-limit SECONDS] [--out PLAN.csv]
    [--plot PNG]``."""
    from jaxalloc.checks.checker import check_allocation
    from jaxalloc.reports.chart import plot_plan

    options = _allocator_options(ns)
    trace = read_trace(ns.file)
    problem = trace.problem(check_alignment(ns.alignment))
    began = time.perf_counter()
    plan = allocate(problem, ns.allocator, **options)
    elapsed = time.perf_counter() - began
    check_allocation(problem, plan)
    bound = lower_bound(problem)
    total = int(problem.padded_sizes.sum())
    chosen = ns.allocator if plan.allocator == ns.allocator else f"{ns.allocator} (won by {plan.allocator})"
    rows = [
        ("trace", os.fspath(ns.file)),
        ("allocator", chosen),
        ("alignment", f"{problem.alignment} B"),
        ("buffers", f"{problem.n:,}"),
        ("lower bound", f"{bound:,} B (max-live)"),
        ("peak", f"{plan.peak:,} B"),
        ("peak / bound", f"{plan.peak / bound:.4f}"),
        ("total size", f"{total:,} B (every buffer in its own memory)"),
        ("footprint", f"{plan.peak / total:.1%} (peak / total)"),
        ("planning time", f"{elapsed:.3f} s"),
    ]
    if plan.proven_optimal is not None:
        rows.append(("optimal", "proven" if plan.proven_optimal else "not proven"))
    for key, value in rows:
        print(f"{key:<14}{value}")
    if ns.out:
        write_plan(ns.out, trace, plan.offsets)
        print(f"{'plan':<14}{ns.out}")
    if ns.plot:
        plot_plan(
            ns.plot,
            names=trace.ids,
            sizes=problem.padded_sizes,
            offsets=plan.offsets,
            starts=trace.lower,
            ends=trace.upper,
            peak=plan.peak,
            bound=bound,
            title=f"{os.path.basename(os.fspath(ns.file))} — {chosen}",
        )
        print(f"{'chart':<14}{ns.plot}")
