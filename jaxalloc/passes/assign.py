"""The planning passes of jaxalloc: they translate between jx IR and plans, the algorithms live elsewhere.

- `jx-liveness` writes each value's half-open lifetime on its block's schedule (`mem.live`), for
  reading and for tests of the liveness rules.
- `jx-assign-buffers{allocator=nnc alignment=64 include-outputs=false}` plans every function,
  checks the plan with the static plan checker, planning again where it must
  (`planning.replanning.assign`), and writes it onto the IR as `mem` attributes
  (`planning.lowering.annotate`).
- `jx-verify-plan` re-plans nothing: it runs the static plan checker on every planned function,
  naming the value read, the value written over it and the loop round when the plan is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Block
from xdsl.passes import ModulePass
from xdsl.utils.exceptions import DiagnosticException

from jaxalloc.allocators import get_allocator
from jaxalloc.checks.plan_check import check_planned
from jaxalloc.dialects import jx
from jaxalloc.errors import JaxallocError, PlanViolation, check_alignment
from jaxalloc.analysis.liveness import block_liveness
from jaxalloc.planning.replanning import assign


def _functions(module: ModuleOp) -> list[jx.FuncOp]:
    return [op for op in module.ops if isinstance(op, jx.FuncOp)]


def _blocks(func: jx.FuncOp) -> list[Block]:
    """The function's block and every block nested in it."""
    return [func.body.block, *(r.block for o in func.walk() for r in o.regions if o is not func)]


@dataclass(frozen=True)
class LivenessPass(ModulePass):
    """Annotates every op with the lifetimes of its results: `mem.live = ["[def, end)", ...]`."""

    name = "jx-liveness"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in _functions(op):
            for block in _blocks(func):
                live = block_liveness(block)
                spans = dict(zip(live.values, zip(live.start.tolist(), live.end.tolist())))
                for inner in block.ops:
                    if inner.results:
                        inner.attributes["mem.live"] = ArrayAttr(
                            StringAttr(f"[{spans[r][0]}, {spans[r][1]})") for r in inner.results
                        )


@dataclass(frozen=True)
class AssignBuffersPass(ModulePass):
    """Gives every value of every jx function a place in one arena (NNC, with multi-view loops)."""

    name = "jx-assign-buffers"

    allocator: str = "nnc"
    """A registered allocator name (`jaxalloc.allocators.ALLOCATORS`)."""
    alignment: int = 64
    """Every offset is a multiple of it."""
    include_outputs: bool = False
    """Plan the function's outputs in the arena too (by default they are separate, as XLA's)."""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        try:
            get_allocator(self.allocator)
            check_alignment(self.alignment)
        except JaxallocError as e:
            raise DiagnosticException(str(e)) from None
        for func in _functions(op):
            try:
                assign(func, self.allocator, self.alignment, self.include_outputs)
            except (PlanViolation, JaxallocError) as e:
                raise DiagnosticException(str(e)) from None


@dataclass(frozen=True)
class VerifyPlanPass(ModulePass):
    """Checks the plan written on every function with the static plan checker (`plan_check`),
    which reads the `mem` attributes alone and walks every branch and loop round."""

    name = "jx-verify-plan"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in _functions(op):
            try:
                check_planned(func)
            except PlanViolation as e:
                raise DiagnosticException(str(e)) from None
