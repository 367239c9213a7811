"""`jx-dce`: values nothing needs are removed, loop-carried positions and case results included.

A jaxpr keeps every equation the user wrote, a `while_loop` carries every value handed to it, and
a scan stacks every `ys`, read or not. XLA removes what nothing reads before it assigns buffers, so
a plan of the jaxpr as written would give memory to values XLA never creates. Worse for a memory
planner, a carried position that nothing reads can still force a copy between rounds (a position
handed another position's carry, a rotation through a branch): removing it removes the copy.

What is needed: the function's outputs, every op with an `effect` (and the loops and cases around it,
whose conditions and indices then run too), and, through a fixed point, every operand of a needed
op. A loop position is needed where its result, its value in the condition or its value in the
body is; then its init operand and the value the body yields for it are needed. A case result is
needed where the case result is; then each branch's value for it is.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, BlockArgument, Operation, Region, SSAValue
from xdsl.passes import ModulePass

from jaxalloc.dialects import jx


@dataclass(frozen=True)
class DeadCodePass(ModulePass):
    """Removes from every function what neither its outputs nor an op with an effect needs."""

    name = "jx-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in op.ops:
            if isinstance(func, jx.FuncOp):
                remove_dead_code(func)


class _Needed:
    """The values, ops and loop positions a function needs."""

    def __init__(self) -> None:
        self.values: set[SSAValue] = set()
        self.ops: set[Operation] = set()
        self.positions: set[tuple[jx.WhileOp, int]] = set()
        self.pending: list[SSAValue] = []

    def value(self, value: SSAValue) -> None:
        if value not in self.values:
            self.values.add(value)
            self.pending.append(value)

    def op(self, op: Operation) -> None:
        """`op` runs: so does the region op around it, and what it reads is needed."""
        if op in self.ops:
            return
        self.ops.add(op)
        parent = op.parent_op()
        if isinstance(parent, jx.WhileOp | jx.CaseOp):
            self.op(parent)
        if isinstance(op, jx.WhileOp):
            self.value(op.cond.block.last_op.operands[0])
        elif isinstance(op, jx.CaseOp):
            self.value(op.index)
        elif not isinstance(op, jx.YieldOp):
            for operand in op.operands:
                self.value(operand)

    def position(self, loop: jx.WhileOp, k: int) -> None:
        if (loop, k) in self.positions:
            return
        self.positions.add((loop, k))
        self.op(loop)
        self.value(loop.inits[k])
        self.value(loop.body.block.last_op.operands[k])

    def settle(self) -> None:
        while self.pending:
            value = self.pending.pop()
            if isinstance(value, BlockArgument):
                loop = value.block.parent_op()
                if isinstance(loop, jx.WhileOp):
                    self.position(loop, value.index)
                continue
            owner = value.owner
            self.op(owner)
            k = owner.results.index(value)
            if isinstance(owner, jx.WhileOp):
                self.position(owner, k)
            elif isinstance(owner, jx.CaseOp):
                for branch in owner.branches:
                    self.value(branch.block.last_op.operands[k])


def remove_dead_code(func: jx.FuncOp) -> None:
    """Erase from `func` every op, loop position and case result that neither its outputs nor an op
    with an effect needs."""
    needed = _Needed()
    for value in func.body.block.last_op.operands:
        needed.value(value)
    for op in func.walk():
        if isinstance(op, jx.PrimOp) and op.effect is not None:
            needed.op(op)
    needed.settle()
    _sweep(func.body.block, needed)


def _sweep(block: Block, needed: _Needed) -> None:
    """Erase what is not needed, last op first, so that what reads a value goes before it."""
    for op in reversed(list(block.ops)):
        if isinstance(op, jx.YieldOp):
            continue
        if op not in needed.ops:
            op.detach()
            op.erase(safe_erase=False)
        elif isinstance(op, jx.WhileOp):
            _sweep_loop(op, needed)
        elif isinstance(op, jx.CaseOp):
            _sweep_case(op, needed)


def _sweep_loop(loop: jx.WhileOp, needed: _Needed) -> None:
    live = [k for k in range(len(loop.inits)) if (loop, k) in needed.positions]
    _keep_yielded(loop.body.block, live)
    for region in (loop.cond, loop.body):
        _sweep(region.block, needed)
        for k in reversed(range(len(loop.inits))):
            if k not in live:
                region.block.erase_arg(region.block.args[k])
    if len(live) == len(loop.inits):
        return
    regions = [loop.detach_region(region) for region in (loop.cond, loop.body)]
    _replace(loop, jx.WhileOp([loop.inits[k] for k in live], *regions, *loop.said_rounds), live)


def _sweep_case(case: jx.CaseOp, needed: _Needed) -> None:
    live = [k for k, result in enumerate(case.results) if result in needed.values]
    for branch in case.branches:
        _keep_yielded(branch.block, live)
        _sweep(branch.block, needed)
    if len(live) == len(case.results):
        return
    regions: list[Region] = [case.detach_region(branch) for branch in list(case.branches)]
    _replace(case, jx.CaseOp(case.index, [case.results[k].type for k in live], regions), live)


def _keep_yielded(block: Block, live: list[int]) -> None:
    """Make the block's yield hand on only the values at positions `live`."""
    old = block.last_op
    if len(live) == len(old.operands):
        return
    block.insert_op_before(jx.YieldOp(*(old.operands[k] for k in live)), old)
    old.detach()
    old.erase()


def _replace(old: Operation, new: Operation, live: list[int]) -> None:
    """Put `new`, whose results are `old`'s results at positions `live`, in `old`'s place."""
    new.location = old.location
    new.attributes |= old.attributes
    old.parent_block().insert_op_before(new, old)
    for result, k in zip(new.results, live):
        result.name_hint = old.results[k].name_hint
        old.results[k].replace_all_uses_with(result)
    old.detach()
    old.erase()
