"""How a message names an IR value: its `%name` and what defines it, with the source line."""

from __future__ import annotations

import os

from xdsl.dialects.builtin import FileLineColLoc, UnknownLoc
from xdsl.ir import BlockArgument, SSAValue

from jaxalloc.dialects import jx


def value_name(value: SSAValue) -> str:
    """`%name` as the IR prints it, `%?` for a value without a name hint."""
    return f"%{value.name_hint}" if value.name_hint else "%?"


def value_label(value: SSAValue) -> str:
    """What defines `value`, for people: `dot_general models.py:24`, `while models.py:30`, `argument`."""
    if isinstance(value, BlockArgument):
        parent = value.block.parent_op()
        return "argument" if parent is None or isinstance(parent, jx.FuncOp) else f"{_op_name(parent)} carry"
    op = value.owner
    location = op.location
    while op is not None and isinstance(location, UnknownLoc):  # glue of a loop: the loop's line
        op = op.parent_op()
        location = op.location if op is not None else location
    name = _op_name(value.owner)
    if isinstance(location, FileLineColLoc):
        return f"{name} {os.path.basename(location.filename.data)}:{location.line.data}"
    return name


def _op_name(op) -> str:
    if isinstance(op, jx.PrimOp):
        return op.primitive.data
    return op.name.removeprefix("jx.")
