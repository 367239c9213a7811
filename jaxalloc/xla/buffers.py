"""Re-planning XLA's own buffers: our allocators against XLA's heap simulator on the same input.

The function is compiled with matmul fusion off (so no buffer hides inside a fused custom call)
and `xla_dump_to` set for that one compilation (a per-compilation compiler option, so no
subprocess and no global flag is needed). From the dump, `temp_problem` rebuilds the allocation
problem of the `preallocated-temp` allocation, the one `temp_size_in_bytes` measures:

- Live ranges: XLA's are inclusive `[first, last]` (a value is freed after the values defined at
  its last step are placed), so each becomes the half-open `[first, last + 1)`.
- Buffers: values XLA placed at the same offset whose ranges overlap or touch are one buffer:
  XLA let a result take its operand's memory in place, or the values alias (a loop's init, its
  parameters, its new value and its result). The buffer's size is the largest value's.
- Loop-carried buffers: XLA may reuse a carried buffer's memory in the body between the last
  read of the old value and the write of the new one, so the pieces of one loop buffer around
  such a gap are separate blocks that must share an offset (companions): at one offset, every
  buffer holding a phi value (a loop parameter or result) is a companion of the others.

XLA's own placement must be a valid answer of the rebuilt problem (`XlaReplan` checks it with the
independent checker), and every allocator's answer is checked too. Sizes are compared as XLA
reports them: the end of the highest byte, without padding after the last buffer.
"""

from __future__ import annotations

import glob
import os
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import jax
import numpy as np

from jaxalloc.allocators import ALLOCATORS, Problem, allocate
from jaxalloc.allocators.bound import max_live
from jaxalloc.checks.checker import check_allocation, check_plan
from jaxalloc.reports.text import format_size, text_table
from jaxalloc.xla.dump import (
    XlaAllocation,
    XlaDumpError,
    XlaLiveRanges,
    XlaValue,
    parse_buffer_assignment,
    parse_live_ranges,
)
from jaxalloc.xla.memory import FUSION_OFF

_ASSIGNMENT = "*after_optimizations-buffer-assignment.txt"
_LIVE_RANGE = "*after_optimizations-live-range.txt"


@dataclass(frozen=True)
class XlaDump:
    """The buffer assignment and live ranges XLA dumped for one compilation."""

    allocations: tuple[XlaAllocation, ...]
    live_ranges: XlaLiveRanges
    temp_size_in_bytes: int
    """`memory_analysis().temp_size_in_bytes` of the same compilation."""
    assignment_path: str
    """The file names as XLA wrote them (the directory is gone), for error messages."""
    live_range_path: str


def dump_xla_buffers(
    fn: Callable, args: tuple, kwargs: Mapping | None = None, *, compiler_options: Mapping | None = None
) -> XlaDump:
    """Compile `fn` for `args` with XLA's dump on, and parse its buffer assignment and live ranges.

    `compiler_options` defaults to matmul fusion off on CPU (and none elsewhere).
    """
    if compiler_options is None:
        compiler_options = FUSION_OFF if jax.default_backend() == "cpu" else {}
    with tempfile.TemporaryDirectory(prefix="jaxalloc-xla-") as directory:
        lowered = jax.jit(_named_afresh(fn)).lower(*args, **dict(kwargs or {}))
        compiled = lowered.compile(compiler_options={**compiler_options, "xla_dump_to": directory})
        assignment_path = _one(directory, _ASSIGNMENT)
        live_range_path = _one(directory, _LIVE_RANGE)
        with open(assignment_path) as f:
            allocations = parse_buffer_assignment(f.read(), os.path.basename(assignment_path))
        with open(live_range_path) as f:
            live_ranges = parse_live_ranges(f.read(), os.path.basename(live_range_path))
    return XlaDump(
        tuple(allocations),
        live_ranges,
        int(compiled.memory_analysis().temp_size_in_bytes),
        os.path.basename(assignment_path),
        os.path.basename(live_range_path),
    )


def _named_afresh(fn: Callable) -> Callable:
    """`fn` under a name no compile had: JAX's persistent compilation cache, where one is set, keys
    a compile by its module (dump options left out), and a hit compiles, and so dumps, nothing."""

    def fresh(*args, **kwargs):
        return fn(*args, **kwargs)

    fresh.__name__ = fresh.__qualname__ = f"{getattr(fn, '__name__', 'fn')}_{uuid.uuid4().hex[:12]}"
    return fresh


def _one(directory: str, pattern: str) -> str:
    found = sorted(glob.glob(os.path.join(directory, pattern)))
    if len(found) != 1:
        raise XlaDumpError(f"expected one {pattern} in XLA's dump, found {len(found)}")
    return found[0]


@dataclass(frozen=True)
class XlaBufferProblem:
    """XLA's `preallocated-temp` allocation as a plain allocation problem, with XLA's own answer."""

    problem: Problem
    """One block per XLA buffer: half-open live intervals, companions for loop buffers, names."""
    xla_offsets: np.ndarray
    """Where XLA placed each block."""
    xla_temp: int
    """The allocation's size: XLA's `temp_size_in_bytes`."""
    values: tuple[tuple[XlaValue, ...], ...]
    """The HLO values of each block."""

    def end(self, offsets) -> int:
        """Bytes up to the end of the highest block, as XLA sizes an allocation (no trailing padding)."""
        sizes = np.asarray(self.problem.sizes, np.int64)
        return int((np.asarray(offsets, np.int64) + sizes).max()) if len(sizes) else 0

    @property
    def bound(self) -> int:
        """Max-live of the blocks' sizes: no placement of these buffers ends lower."""
        p = self.problem
        return max_live(Problem.from_intervals(p.sizes, p.starts, p.ends)) if p.n else 0


def temp_problem(dump: XlaDump, alignment: int = 64) -> XlaBufferProblem:
    """Rebuild the allocation problem of the dump's `preallocated-temp` allocation."""
    temps = [a for a in dump.allocations if a.is_temp]
    if len(temps) > 1:
        raise XlaDumpError(f"{dump.assignment_path}: {len(temps)} preallocated-temp allocations, expected at most one")
    if not temps:
        return XlaBufferProblem(Problem.from_intervals([], [], [], alignment=alignment), np.zeros(0, np.int64), 0, ())
    temp = temps[0]
    by_offset: dict[int, list[tuple[int, int, XlaValue]]] = {}
    for value in temp.values:
        span = dump.live_ranges.ranges.get(value.key)
        if span is None:
            raise XlaDumpError(
                f"{dump.live_range_path}: no live range for {value.key}, placed in allocation {temp.index} "
                f"of {dump.assignment_path}"
            )
        if value.size:
            by_offset.setdefault(value.offset, []).append((*span, value))
    offsets, sizes, starts, ends, names, members, companions = [], [], [], [], [], [], []
    for offset, spans in sorted(by_offset.items()):
        loop_blocks = []
        for first, last, values in _touching(spans):
            if any(v.phi for v in values):
                loop_blocks.append(len(sizes))
            offsets.append(offset)
            sizes.append(max(v.size for v in values))
            starts.append(first)
            ends.append(last + 1)
            names.append(values[0].key)
            members.append(tuple(values))
        if len(loop_blocks) > 1:
            companions.append(tuple(loop_blocks))
    problem = Problem.from_intervals(
        sizes, starts, ends, alignment=alignment, companions=tuple(companions), names=tuple(names)
    )
    return XlaBufferProblem(problem, np.array(offsets, np.int64), temp.size, tuple(members))


def _touching(spans: list[tuple[int, int, XlaValue]]) -> list[tuple[int, int, list[XlaValue]]]:
    """Values at one offset, grouped where their inclusive ranges overlap or touch."""
    groups: list[tuple[int, int, list[XlaValue]]] = []
    for first, last, value in sorted(spans, key=lambda s: (s[0], s[1], s[2].id)):
        if groups and first <= groups[-1][1]:
            start, end, values = groups[-1]
            groups[-1] = (start, max(end, last), [*values, value])
        else:
            groups.append((first, last, [value]))
    return groups


@dataclass(frozen=True)
class ReplanResult:
    """One allocator on XLA's buffers."""

    allocator: str
    bytes: int
    """End of the highest block (XLA's way of sizing the allocation)."""
    seconds: float


@dataclass(frozen=True)
class XlaReplan:
    """XLA's temp allocation re-planned by our allocators."""

    function: str
    blocks: int
    values: int
    xla_temp: int
    bound: int
    results: tuple[ReplanResult, ...]

    def result(self, allocator: str) -> ReplanResult:
        return next(r for r in self.results if r.allocator == allocator)

    def table(self) -> str:
        """A text table: XLA's temp, each allocator's bytes and ratio to it, and the bound."""
        rows = [["XLA heap simulator (temp_size_in_bytes)", format_size(self.xla_temp), f"{self.xla_temp:,}", "1.0000"]]
        for r in self.results:
            ratio = f"{r.bytes / self.xla_temp:.4f}" if self.xla_temp else "n/a"
            rows.append([f"{r.allocator} ({r.seconds:.2f} s)", format_size(r.bytes), f"{r.bytes:,}", ratio])
        ratio = f"{self.bound / self.xla_temp:.4f}" if self.xla_temp else "n/a"
        rows.append(["max-live bound", format_size(self.bound), f"{self.bound:,}", ratio])
        header = ["", "size", "bytes", "/ XLA temp"]
        lines = [
            f"{self.function}: XLA's own temp buffers ({self.blocks} buffers from {self.values} HLO values, "
            "matmul fusion off) re-planned by every allocator; every plan, XLA's included, passed the checker"
        ]
        return "\n".join(lines + text_table(header, rows))

    def __str__(self) -> str:
        return self.table()


def replan_problem(
    rebuilt: XlaBufferProblem, function: str = "", allocators: Sequence[str] | None = None
) -> XlaReplan:
    """Plan a rebuilt XLA problem with every allocator (or those named), each answer checked."""
    problem = rebuilt.problem
    raw = Problem.from_intervals(problem.sizes, problem.starts, problem.ends, companions=problem.companions)
    check_plan(raw, rebuilt.xla_offsets)  # XLA's placement answers our problem: else the rebuild is wrong
    results = []
    for name in allocators or ALLOCATORS:
        began = time.perf_counter()
        allocation = allocate(problem, name)
        seconds = time.perf_counter() - began
        check_allocation(problem, allocation)
        results.append(ReplanResult(name, rebuilt.end(allocation.offsets), seconds))
    return XlaReplan(
        function=function,
        blocks=problem.n,
        values=sum(len(v) for v in rebuilt.values),
        xla_temp=rebuilt.xla_temp,
        bound=rebuilt.bound,
        results=tuple(results),
    )


def replan_xla_buffers(
    fn: Callable,
    args: tuple,
    kwargs: Mapping | None = None,
    *,
    allocators: Sequence[str] | None = None,
    alignment: int = 64,
) -> XlaReplan:
    """Compile `fn` (fusion off on CPU), rebuild XLA's temp allocation problem, and plan it with our allocators."""
    dump = dump_xla_buffers(fn, args, kwargs)
    rebuilt = temp_problem(dump, alignment)
    if rebuilt.xla_temp != dump.temp_size_in_bytes:
        raise XlaDumpError(
            f"{dump.assignment_path}: preallocated-temp holds {rebuilt.xla_temp} bytes but memory_analysis() "
            f"reports temp_size_in_bytes = {dump.temp_size_in_bytes}"
        )
    return replan_problem(rebuilt, getattr(fn, "__name__", type(fn).__name__), allocators)
