"""Liveness on nested regions: where each value of a block is defined and last used.

Every block has its own sequential schedule (op `i` of the block is step `i`). A use inside
a nested region counts as a use by the region op in the block that holds it, so a value
read by a loop body stays alive for the whole loop. Lifetimes are half-open: a value
defined at step `s` and last used at step `u` lives on `[s, u + 1)`; block arguments are
defined at step 0, and a value never used lives on `[s, s + 1)`. Two values whose
lifetimes overlap conflict, so an op's operands and results conflict unless the op runs
in place.

`flat_schedule` expands region bodies in place into one global schedule, for reports and
for checking a whole plan at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.ir import Block, BlockArgument, Operation, SSAValue


def defined_in(value: SSAValue, block: Block) -> bool:
    """Whether `value` is a block argument of `block` or a result of an op directly in it."""
    if isinstance(value, BlockArgument):
        return value.block is block
    return value.owner.parent_block() is block


def op_of(op: Operation, block: Block) -> Operation | None:
    """The op of `block` that `op` is or lies in (None where it lies outside `block`): a use inside a
    nested region is a use by the region op that holds it."""
    while op is not None and op.parent_block() is not block:
        op = op.parent_op()
    return op


@dataclass(frozen=True)
class BlockLiveness:
    """The lifetimes of a block's values: its arguments, then every op result in order."""

    values: tuple[SSAValue, ...]
    start: np.ndarray
    end: np.ndarray

    def interval(self, value: SSAValue) -> tuple[int, int]:
        i = self.values.index(value)
        return int(self.start[i]), int(self.end[i])


def block_liveness(block: Block) -> BlockLiveness:
    """Half-open lifetimes of the values of `block` on its own schedule."""
    values: list[SSAValue] = list(block.args)
    start = [0] * len(values)
    last: dict[SSAValue, int] = {}
    for index, op in enumerate(block.ops):
        values.extend(op.results)
        start.extend([index] * len(op.results))
        for nested in op.walk() if op.regions else (op,):
            for value in nested.operands:
                last[value] = index  # read only for the values of `block`
    end = [max(last.get(v, s), s) + 1 for v, s in zip(values, start)]
    return BlockLiveness(tuple(values), np.array(start, np.int64), np.array(end, np.int64))


def last_uses(block: Block) -> list[list[SSAValue]]:
    """For each op of `block` in order, the values of `block` that die at it."""
    liveness = block_liveness(block)
    dying: list[list[SSAValue]] = [[] for _ in block.ops]
    for value, end in zip(liveness.values, liveness.end):
        dying[int(end) - 1].append(value)
    return dying


def flat_schedule(root: Operation) -> dict[Operation, tuple[int, int]]:
    """Each op nested in `root`, with its half-open span on one global schedule.

    Ops are numbered in program order with region bodies expanded in place: an op without
    regions takes one step, a region op spans all the steps of its regions plus its own.
    """
    spans: dict[Operation, tuple[int, int]] = {}
    step = 0

    def visit(op: Operation) -> None:
        nonlocal step
        begin = step
        for region in op.regions:
            for block in region.blocks:
                for nested in block.ops:
                    visit(nested)
        step += 1
        spans[op] = (begin, step)

    for region in root.regions:
        for block in region.blocks:
            for op in block.ops:
                visit(op)
    return spans
