"""Liveness on nested regions: where each value of a block is used for the last time.

A use inside a nested region counts as a use by the region op in the block that holds
it, so a value read by a loop body stays alive for the whole loop.
"""

from __future__ import annotations

from xdsl.ir import Block, BlockArgument, SSAValue


def defined_in(value: SSAValue, block: Block) -> bool:
    """Whether `value` is a block argument of `block` or a result of an op directly in it."""
    if isinstance(value, BlockArgument):
        return value.block is block
    return value.owner.parent_block() is block


def last_uses(block: Block) -> list[list[SSAValue]]:
    """For each op of `block` in order, the values of `block` that die at it.

    Values never used (dropped results, unused arguments) die at their definition;
    unused block arguments are reported at the first op.
    """
    ops = list(block.ops)
    last: dict[SSAValue, int] = {}
    for index, op in enumerate(ops):
        for value in op.results:
            last[value] = index
        for nested in op.walk():
            for value in nested.operands:
                if defined_in(value, block):
                    last[value] = index
    dying: list[list[SSAValue]] = [[] for _ in ops]
    for value in block.args:
        dying[last.get(value, 0)].append(value)
    for value, index in last.items():
        if not isinstance(value, BlockArgument):
            dying[index].append(value)
    return dying

