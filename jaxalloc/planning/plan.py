"""`Plan`: what a planned function needs, in the form users and tests rely on.

`buffers` are rows on the flattened schedule with absolute arena offsets, one per buffer and
one per multi-view slot: any two rows overlapping in time are disjoint in address. That is
the checkable form of the plan; `check()` runs the independent checker over it.

A plan made from a function (`planned(f).plan(*args)`) also knows the function and its example
arguments, so `compare_xla()` can compile the same function with XLA and put the numbers side by side.
`report()` is the text a person reads first: the arena, the bound, where the peak is and which
buffers (primitive and source line) make it.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.printer import Printer
from xdsl.traits import IsolatedFromAbove

from jaxalloc.allocators import Problem, get_allocator
from jaxalloc.allocators.bound import max_live
from jaxalloc.checks.checker import check_plan
from jaxalloc.checks.plan_check import PlanCheck, check_planned
from jaxalloc.dialects import jx
from jaxalloc.errors import JaxallocError, PlanViolation, check_alignment, check_top
from jaxalloc.frontend.labels import value_label
from jaxalloc.planning.assignment import BlockPlan, Row, plan_rows
from jaxalloc.planning.replanning import assign
from jaxalloc.analysis.liveness import flat_schedule
from jaxalloc.reports.chart import plot_plan, write_plan_csv
from jaxalloc.reports.perfetto import write_trace_events
from jaxalloc.reports.text import format_size, plural, text_table
from jaxalloc.xla.memory import CallMemory, XlaComparison, compare_with_xla


@dataclass(frozen=True)
class Plan:
    """The arena plan of one function for one input signature."""

    module: ModuleOp
    """The planned module: the jx IR with the plan as `mem` attributes."""
    allocator: str
    alignment: int
    arena_bytes: int
    buffers: tuple[Row, ...]
    include_outputs: bool = False
    products_outside: bool = False
    """The values of matrix products and convolutions in XLA's own buffers (`plan_function`)."""
    small_outside: bool = False
    """Every small value in XLA's own buffers (`plan_function`)."""
    schedule: tuple[str, ...] = ()
    """What runs at each step of the flattened schedule (primitive and source line), for reports."""
    function: Callable | None = field(default=None, repr=False, compare=False)
    """The planned Python function, when the plan was made from one."""
    example_args: tuple = field(default=(), repr=False, compare=False)
    """The arguments it was planned for (arrays or ShapeDtypeStructs)."""
    example_kwargs: dict = field(default_factory=dict, repr=False, compare=False)
    source: ModuleOp | None = field(default=None, repr=False, compare=False)
    """The module as it was before planning (after the jx passes), to plan again with the outputs
    inside or outside the arena."""
    donated: tuple[int, ...] = ()
    """The flat arguments donated, as `jax.jit(f, donate_argnums=...)` donates them: rows of the arena
    from the start of the function to their last use."""
    measure_call: Callable[[dict | None], CallMemory] | None = field(default=None, repr=False, compare=False)
    """What a compiled call of the function holds for these arguments, by its parts, its kernel
    compiled with the XLA compiler options given (`CallMemory`); where `Planned.plan` made the plan
    of a function in compiled mode."""

    @property
    def problem(self) -> Problem:
        """The rows as a plain allocation problem (intervals on the flattened schedule)."""
        rows = self.buffers
        return Problem.from_intervals(
            [r.size for r in rows], [r.start for r in rows], [r.end for r in rows], alignment=self.alignment
        )

    @property
    def lower_bound(self) -> int:
        """Max-live of the rows: no plan of these buffers at this granularity needs less."""
        return max_live(self.problem)

    @property
    def total_bytes(self) -> int:
        """The rows' sizes added up: the memory of a plan that reuses nothing (ONNC's total tensor size)."""
        return sum(r.size for r in self.buffers)

    def check(self) -> PlanCheck:
        """Check the plan two ways: the static plan checker walks the planned module (every branch, loop
        rounds until every ring repeats) and raises `PlanViolation` at a read of an overwritten value;
        the rows must be pairwise disjoint where they overlap in time (`InvalidPlanError`). Returns
        what the walk found (the copies a run would make on some path)."""
        found = check_planned(_function(self.module))
        check_plan(self.problem, [r.offset for r in self.buffers], self.arena_bytes)
        return found

    def to_csv(self, path) -> None:
        """One row per buffer: `tensor_name,size,offset,start_time,end_time`."""
        write_plan_csv(path, **self._columns())

    def plot(self, path, title: str | None = None) -> None:
        """A Gantt chart of the plan (time on x, address on y) with the peak and the bound; the largest
        buffers are labelled with their name, primitive and source line."""
        plot_plan(
            path,
            **self._columns(),
            peak=self.arena_bytes,
            bound=self.lower_bound,
            title=title if title is not None else self._title(),
            labels=[r.label for r in self.buffers],
        )

    def to_perfetto(self, path) -> None:
        """A Chrome trace-event JSON file to open in the Perfetto UI (ui.perfetto.dev): one track group per
        region, a slice per buffer over its lifetime (offset and size in its args), a counter of live bytes."""
        write_trace_events(
            path,
            **self._columns(),
            regions=[r.region for r in self.buffers],
            labels=[r.label for r in self.buffers],
            title=self._title(),
        )

    def compare_xla(self) -> XlaComparison:
        """XLA's `memory_analysis()` of the same function beside this plan; print it for a table.

        The figure to read is the arena with the outputs inside against XLA's `temp + output - alias`
        (docs/design/assignment.md says why), so the function is planned again from the same module,
        allocator and alignment with the outputs inside, and with them outside for the figures that
        set the arena against temp alone. Compiles the function with `jax.jit` (default flags, and on
        CPU with matmul fusion off too), with the plan's donation, and, for a function planned in
        compiled mode, its kernel with the same flags: what a call holds, by its parts, beside XLA's.
        Needs a plan made from a function (`planned(f).plan(*args)`).
        """
        if self.function is None or self.source is None:
            raise JaxallocError("this plan was made from a module, not a function: use planned(f).plan(*args) to compare with XLA")
        source = self.source

        def planned_with(include_outputs: bool) -> Plan:
            if self.include_outputs == include_outputs and not (self.products_outside or self.small_outside):
                return self
            return make_plan(source, self.allocator, self.alignment, include_outputs=include_outputs,
                             donated=self.donated)

        inside, outside = planned_with(True), planned_with(False)
        return compare_with_xla(
            self.function,
            self.example_args,
            self.example_kwargs,
            donated=self.donated,
            allocator=self.allocator,
            arena_bytes=inside.arena_bytes,
            lower_bound=inside.lower_bound,
            outside_arena_bytes=outside.arena_bytes,
            outside_lower_bound=outside.lower_bound,
            total_bytes=inside.total_bytes,
            call_memory=self.measure_call,
        )

    def live_bytes(self) -> np.ndarray:
        """Padded bytes of the rows live at each step of the flattened schedule (its max is the bound)."""
        rows = self.buffers
        steps = max((r.end for r in rows), default=0)
        live = np.zeros(steps + 1, np.int64)
        sizes = self.problem.padded_sizes
        np.add.at(live, [r.start for r in rows], sizes)
        np.subtract.at(live, [r.end for r in rows], sizes)
        return np.cumsum(live)[:steps]

    def report(self, top: int = 10) -> str:
        """A text report: arena, bound, total and footprint (ONNC's figures), where the peak is and what is
        live there, the largest buffers (`top` rows per table)."""
        check_top(top)
        rows = self.buffers
        bound, total = self.lower_bound, self.total_bytes
        lines = [
            f"{self._title()}: arena {_bytes(self.arena_bytes)}, lower bound {_bytes(bound)}, "
            f"arena / bound {_ratio(self.arena_bytes, bound, '.4f')}",
            f"total buffer size {_bytes(total)} (every buffer in its own memory), "
            f"footprint {_ratio(self.arena_bytes, total, '.1%')} (arena / total)",
        ]
        donated = f"; {plural(len(self.donated), 'donated argument')} in it" if self.donated else ""
        outside = f"outside the arena: {self._outside()}{donated}"
        if not rows:
            hint = "" if self.include_outputs else "; plan(..., include_outputs=True) plans every computed value in the arena"
            return "\n".join([*lines, outside, f"nothing to plan{hint}"])
        steps = max(r.end for r in rows)
        lines += [f"{plural(len(rows), 'buffer')} on a {steps:,}-step schedule", outside]
        live = self.live_bytes()
        step = int(np.argmax(live))
        at = self.schedule[step] if step < len(self.schedule) else "?"
        at_peak = sorted((r for r in rows if r.start <= step < r.end), key=lambda r: -r.size)
        lines.append(f"max-live {format_size(int(live[step]))} at step {step} ({at}), {plural(len(at_peak), 'buffer')} live:")
        lines.append(_table(at_peak[:top], len(at_peak) - top))
        if len(at_peak) == len(rows) and len(rows) <= top:
            return "\n".join([*lines, "largest buffers: those above (every buffer is live at max-live)"])
        ordered = sorted(rows, key=lambda r: (-r.size, r.start))
        lines.append("largest buffers:")
        lines.append(_table(ordered[:top], len(ordered) - top))
        return "\n".join(lines)

    def _outside(self) -> str:
        """What the plan leaves outside the arena, in words."""
        if self.include_outputs:
            return "arguments and constants"
        outside = "arguments, constants, outputs"
        return outside + (", matrix products and convolutions" if self.products_outside else "") + (
            ", small values" if self.small_outside else "")

    def __repr__(self) -> str:
        return (
            f"Plan({self._title()}: arena_bytes={self.arena_bytes}, lower_bound={self.lower_bound}, "
            f"buffers={len(self.buffers)})"
        )

    def __str__(self) -> str:
        """A short summary; `report()` has the tables, `module` the planned IR."""
        return (
            f"{self._title()}: arena {format_size(self.arena_bytes)} for {plural(len(self.buffers), 'buffer')}, "
            f"lower bound {format_size(self.lower_bound)}, total {format_size(self.total_bytes)}"
            " (plan.report() for details, plan.module for the planned IR)"
        )

    def _title(self) -> str:
        name = getattr(self.function, "__name__", None) or _function(self.module).sym_name.data
        return f"{name} ({self.allocator}, {self.alignment} B alignment)"

    def _columns(self) -> dict:
        rows = self.buffers
        return {
            "names": [r.name for r in rows],
            "sizes": [r.size for r in rows],
            "offsets": [r.offset for r in rows],
            "starts": [r.start for r in rows],
            "ends": [r.end for r in rows],
        }


def _bytes(size: int) -> str:
    """`1.50 KiB (1,536 B)`; bytes alone below 1 KiB."""
    return format_size(size) if size < 1024 else f"{format_size(size)} ({size:,} B)"


def _ratio(part: int, whole: int, spec: str) -> str:
    return format(part / whole, spec) if whole else "n/a"


def _table(rows, more: int) -> str:
    header = ("name", "size", "offset", "live", "defined by", "region")
    cells = [
        (
            r.name,
            format_size(r.size),
            f"{r.offset:,}",
            f"[{r.start}, {r.end})",
            r.label,
            r.region,
        )
        for r in rows
    ]
    lines = text_table(header, cells, left=(0, 4, 5), indent="  ")
    if more > 0:
        lines.append(f"  ... and {more} more")
    return "\n".join(lines)


def _function(module: ModuleOp) -> jx.FuncOp:
    return next(op for op in module.ops if isinstance(op, jx.FuncOp))


def _schedule_labels(func: jx.FuncOp) -> tuple[str, ...]:
    """The op at each step of the flattened schedule (a region op's own step is its last)."""
    spans = flat_schedule(func)
    labels = [""] * max((end for _, end in spans.values()), default=0)
    for op, (_, end) in spans.items():
        labels[end - 1] = value_label(op.results[0]) if op.results else op.name.removeprefix("jx.")
    return tuple(labels)


def _row_values(plan: BlockPlan):
    """The value each row of `plan_rows` is named after and its ring slot, in `plan_rows`' order."""
    for buffer in plan.buffers:
        named = next((v for v in buffer.values if v.name_hint), buffer.values[0])
        for slot in range(buffer.repeat):
            yield named, slot
    for _, plans in plan.regions.values():
        for child in plans:
            yield from _row_values(child)


def _ir_namer(module: ModuleOp) -> Printer:
    """A printer that has named every value of `module` as printing it would (`f_1` for a second `f`,
    numbers for values without a name hint), visiting values in print order without printing the ops,
    which would cost more than planning small modules."""
    printer = Printer(stream=io.StringIO())

    def visit(op: Operation) -> None:
        for result in op.results:
            printer.print_ssa_value(result)
        isolated = op.has_trait(IsolatedFromAbove)
        if isolated:
            printer.enter_scope()
        for block in (block for region in op.regions for block in region.blocks):
            for arg in block.args:
                printer.print_ssa_value(arg)
            for inner in block.ops:
                visit(inner)
        if isolated:
            printer.exit_scope()

    visit(module)
    return printer


def _named_as_in_ir(module: ModuleOp, plan: BlockPlan, rows: list[Row]) -> tuple[Row, ...]:
    """The rows named as the printed IR names their values (`f_1`, `0`), with the slot of a ring
    (`n[0/2]`), so that reports, charts and CSVs can be read beside the IR."""
    printer = _ir_namer(module)
    values = list(_row_values(plan))
    assert len(values) == len(rows) and all(r.name == (v.name_hint or "%") for r, (v, _) in zip(rows, values))
    return tuple(
        replace(row, name=printer.print_ssa_value(value) + (f"[{slot}/{row.repeat}]" if row.repeat > 1 else ""))
        for row, (value, slot) in zip(rows, values)
    )


def make_plan(
    module: ModuleOp,
    allocator: str = "nnc",
    alignment: int = 64,
    include_outputs: bool = False,
    *,
    products_outside: bool = False,
    small_outside: bool = False,
    function: Callable | None = None,
    args: tuple = (),
    kwargs: dict | None = None,
    donated: Sequence[int] = (),
) -> Plan:
    """Plan the single function of a jx module; the Plan holds a planned copy with `mem` attributes.
    The planned module passes the static plan checker, or `PlanViolation` is raised
    (`UnsupportedProgramError` where the checker gives up on it: `planning.replanning.assign`).

    `function`, `args` and `kwargs`, the Python function the module was traced from and its example arguments,
    let the plan compare itself with XLA. `donated`: the indices of the function's arguments that
    are donated, planned in the arena (`mem.args`). `products_outside`, `small_outside`: see `plan_function`.
    """
    alignment = check_alignment(alignment)
    get_allocator(allocator)
    source, module = module, module.clone()
    func = _function(module)
    donated = tuple(sorted(set(donated)))
    if donated and not 0 <= donated[0] <= donated[-1] < len(func.body.block.args):
        raise JaxallocError(f"donated arguments {list(donated)} of @{func.sym_name.data}, which has {len(func.body.block.args)}")
    # never hand out a plan that lets a value be overwritten before it is read
    try:
        func, block_plan, _ = assign(func, allocator, alignment, include_outputs, donated, products_outside, small_outside)
    except PlanViolation:
        if not small_outside:
            raise
        # a plan the checker refuses with the small values outside the arena (as its walks in 32 groups
        # refused the diffrax gradient of jaxalloc.testing.library's, before `REFINED_GROUPS` had 128)
        # is made again with them in it, a plan of other rings and toggles (`assign` writes it over
        # the refused one)
        small_outside = False
        func, block_plan, _ = assign(func, allocator, alignment, include_outputs, donated, products_outside)
    return Plan(
        module,
        allocator,
        alignment,
        block_plan.size,
        _named_as_in_ir(module, block_plan, plan_rows(func, block_plan)),
        include_outputs=include_outputs,
        products_outside=products_outside,
        small_outside=small_outside,
        schedule=_schedule_labels(func),
        function=function,
        example_args=tuple(args),
        example_kwargs=dict(kwargs or {}),
        source=source if function is not None else None,
        donated=donated,
    )
