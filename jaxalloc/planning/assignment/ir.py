"""Questions about jx IR that assignment asks of values and loops, independent of any plan."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Block, BlockArgument, SSAValue

from jaxalloc.analysis.inplace import PRODUCTS, viewed
from jaxalloc.dialects import jx


def runs_past_inits(loop: jx.WhileOp, initial: Sequence[int]) -> bool:
    """Whether `loop` says it runs at least as many rounds as a position reads init operands in
    place (`initial`: their positions): its result at that position is then always in its ring."""
    return loop.rounds is not None and loop.rounds.data >= len(initial)


def computed_within(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or a region nested in it, and not a constant (which
    stays outside the arena)."""
    return defined_within(value, block) and not is_constant(value)


def is_constant(value: SSAValue) -> bool:
    """Whether `value` is a constant or a view of one (a literal reshaped): outside the arena, never
    computed into a parent's memory."""
    return isinstance(viewed(value).owner, jx.ConstOp)


def defined_within(value: SSAValue, block: Block) -> bool:
    """Whether `value` is defined in `block` or in a region nested in it."""
    at = value.block if isinstance(value, BlockArgument) else value.owner.parent_block()
    while at is not None:
        if at is block:
            return True
        parent = at.parent_op()
        at = parent.parent_block() if parent is not None else None
    return False


def products_values(block: Block) -> set[SSAValue]:
    """The operands and results of the matrix products and convolutions of `block` (a fused op
    holding one counts as one), but values of loops and branches (multi-views and phis) and
    constants."""
    found: set[SSAValue] = set()
    for op in block.ops:
        inner = op.body.block.ops if isinstance(op, jx.FusedOp) else (op,)
        if any(isinstance(o, jx.PrimOp) and o.primitive.data in PRODUCTS for o in inner):
            found.update(v for v in (*op.operands, *op.results) if not isinstance(v, BlockArgument)
                         and not isinstance(viewed(v).owner, jx.WhileOp | jx.CaseOp | jx.ConstOp))
    return found
