"""The checkable form of a plan: one row per buffer and per ring slot on the flattened schedule."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.ir import Block

from jaxalloc.analysis.liveness import flat_schedule
from jaxalloc.dialects import jx
from jaxalloc.frontend.labels import value_label
from jaxalloc.planning.assignment.model import BlockPlan


@dataclass(frozen=True)
class Row:
    """One buffer (or one ring slot) on the flattened schedule, at its absolute arena offset."""

    name: str
    size: int
    offset: int
    start: int
    end: int
    region: str
    repeat: int
    label: str = ""
    """What defines the buffer, for people: the primitive and the user's source line."""


def plan_rows(func: jx.FuncOp, plan: BlockPlan) -> list[Row]:
    """The checkable form of a plan: rows overlapping in time must be disjoint in address."""
    spans = flat_schedule(func)
    rows: list[Row] = []

    def visit(block: Block, block_plan: BlockPlan, base: int, region: str) -> None:
        ops = list(block.ops)
        for buffer in block_plan.buffers:
            begin, finish = spans[ops[buffer.start]][0], spans[ops[buffer.end - 1]][1]
            named = next((v for v in buffer.values if v.name_hint), buffer.values[0])
            name, label = named.name_hint or "%", value_label(named)
            for slot in range(buffer.repeat):
                offset = base + buffer.offset + slot * buffer.slot_size
                rows.append(Row(name, buffer.slot_size, offset, begin, finish, region, buffer.repeat, label))
        for op, (offset, plans) in block_plan.regions.items():
            for i, (child_region, child_plan) in enumerate(zip(op.regions, plans)):
                visit(child_region.block, child_plan, base + offset, f"{region}/{op.name}#{ops.index(op)}.{i}")

    visit(func.body.block, plan, 0, func.sym_name.data)
    return rows
