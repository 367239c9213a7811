"""`Plan`: what a planned function needs, in the form users and tests rely on.

`buffers` are rows on the flattened schedule with absolute arena offsets, one per buffer and
one per multi-view slot: any two rows overlapping in time are disjoint in address. That is
the checkable form of the plan; `check()` runs the independent checker over it.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp

from jaxalloc.allocators import Problem
from jaxalloc.allocators.bound import max_live
from jaxalloc.assignment import Row, plan_function, plan_rows
from jaxalloc.chart import plot_plan, write_plan_csv
from jaxalloc.checker import check_plan
from jaxalloc.dialects import jx


@dataclass(frozen=True)
class Plan:
    """The arena plan of one function for one input signature."""

    module: ModuleOp
    """The planned module: the jx IR with the plan as `mem` attributes."""
    allocator: str
    alignment: int
    arena_bytes: int
    buffers: tuple[Row, ...]

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

    def check(self) -> None:
        """Raise `InvalidPlanError` unless every pair of rows overlapping in time is disjoint in address."""
        check_plan(self.problem, [r.offset for r in self.buffers], self.arena_bytes)

    def to_csv(self, path) -> None:
        """One row per buffer: `tensor_name,size,offset,start_time,end_time`."""
        write_plan_csv(path, **self._columns())

    def plot(self, path, title: str | None = None) -> None:
        """A Gantt chart of the plan (time on x, address on y) with the peak and the bound."""
        plot_plan(path, **self._columns(), peak=self.arena_bytes, bound=self.lower_bound, title=title)

    def _columns(self) -> dict:
        rows = self.buffers
        return {
            "names": [r.name for r in rows],
            "sizes": [r.size for r in rows],
            "offsets": [r.offset for r in rows],
            "starts": [r.start for r in rows],
            "ends": [r.end for r in rows],
        }


def make_plan(module: ModuleOp, allocator: str = "nnc", alignment: int = 64, include_outputs: bool = False) -> Plan:
    """Plan the single function of a jx module; the Plan holds a planned copy with `mem` attributes."""
    from jaxalloc.passes import annotate

    module = module.clone()
    func = next(op for op in module.ops if isinstance(op, jx.FuncOp))
    block_plan = plan_function(func, allocator=allocator, alignment=alignment, include_outputs=include_outputs)
    annotate(func, block_plan)
    return Plan(module, allocator, alignment, block_plan.size, tuple(plan_rows(func, block_plan)))
