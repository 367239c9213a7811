"""`jx-fuse`: chains of elementwise ops become one `jx.fused` op, whose inner values are never planned.

XLA never materialises the links of an elementwise chain (every step of a GELU or a softmax): it
fuses them into one kernel that keeps them in registers. The jaxpr keeps every link, and a plan of
the jaxpr gives each one memory. This pass groups an elementwise op with the elementwise ops that
feed only it (within one block), so that the group computes its result from its inputs in one
kernel: the arena planner sees one op, its operands and its result, and the compiled executor hands
XLA the whole chain to fuse.

A group is a tree: each member but the last has exactly one use, by another member. The fused op
takes the place of the last member; the others move down to it, which is safe for pure ops and only
lengthens the lives of their operands by the ops they skip.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, Region, SSAValue
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from jaxalloc.dialects import jx
from jaxalloc.frontend import BindTable
from jaxalloc.inplace import ELEMENTWISE

def fusible(op: Operation) -> bool:
    """Elementwise ops of operands of their own shape fuse: a kernel computes them element by element,
    in registers. A scalar operand, or one with size 1 where the result is larger (the op broadcasts
    it, as after `jx-canonicalize`), is read as it is, except by a division: of an operand with fewer
    elements XLA computes what it can once, before the loop over elements, in memory of its own
    that no plan would see (1 / x for a division by x)."""
    if not isinstance(op, jx.PrimOp) or op.primitive.data not in ELEMENTWISE or len(op.results) != 1:
        return False
    shape = op.results[0].type.get_shape()
    smaller = op.primitive.data not in _HOISTED
    return all(v.type.get_shape() == shape or (smaller and _broadcasts_to(v.type.get_shape(), shape)) for v in op.operands)


def _broadcasts_to(operand: tuple[int, ...], shape: tuple[int, ...]) -> bool:
    """A scalar, or an operand of the result's rank with size 1 where the result's size differs."""
    return not operand or len(operand) == len(shape) and all(d in (1, s) for d, s in zip(operand, shape))


_HOISTED = frozenset({"div", "rem", "pow", "atan2"})
"""Elementwise primitives whose smaller operand XLA turns into something computed once."""


def _consumer(op: Operation) -> Operation | None:
    """The one op that uses `op`'s result, in `op`'s own block, if there is exactly one use."""
    uses = list(op.results[0].uses)
    if len(uses) != 1:
        return None
    user = uses[0].operation
    return user if user.parent_block() is op.parent_block() else None


def fuse_block(block: Block) -> int:
    """Fuse the elementwise groups of `block` (not of nested blocks); returns how many it made."""
    members: dict[Operation, list[Operation]] = {}
    for op in block.ops:
        if not fusible(op):
            continue
        group = members.pop(op, []) + [op]
        consumer = _consumer(op)
        # only values of the consumer's shape: XLA computes an expression of smaller operands once,
        # before the loop over elements, in memory of its own that no plan would see
        if consumer is not None and fusible(consumer) and consumer.results[0].type == op.results[0].type:
            members.setdefault(consumer, []).extend(group)
        elif len(group) > 1:
            members[op] = group
    roots = [(root, group) for root, group in members.items() if group[-1] is root]
    for root, group in roots:
        _fuse(root, sorted(group, key=block.get_operation_index))
    return len(roots)


def _fuse(root: Operation, group: list[Operation]) -> None:
    inside = {r for op in group for r in op.results}
    operands: list[SSAValue] = []
    for op in group:
        operands.extend(v for v in op.operands if v not in inside and v not in operands)
    body = Block(arg_types=[v.type for v in operands])
    mapping: dict[SSAValue, SSAValue] = dict(zip(operands, body.args))
    for op in group:
        clone = op.clone(value_mapper=mapping)
        body.add_op(clone)
        mapping.update(zip(op.results, clone.results))
    body.add_op(jx.YieldOp(*(mapping[r] for r in root.results)))
    fused = jx.FusedOp(operands, [r.type for r in root.results], Region(body))
    for result in fused.results:
        result.name_hint = root.results[result.index].name_hint
    Rewriter.replace_op(root, fused)
    for op in reversed(group[:-1]):
        Rewriter.erase_op(op)


@dataclass(frozen=True, eq=False)
class FusedBinding:
    """What a `jx.fused` op binds: its body's primitives in order, as one function of its operands
    (the executors bind it like a primitive; under `jax.jit` it is one kernel)."""

    op: jx.FusedOp
    table: BindTable

    @property
    def key(self) -> tuple:
        return ("jx.fused", id(self.op))

    def bind(self, *args):
        env = dict(zip(self.op.body.block.args, args))
        for inner in self.op.body.block.ops:
            if isinstance(inner, jx.YieldOp):
                return tuple(env[v] for v in inner.operands)
            env.update(zip(inner.results, self.table[inner.key.data].bind(*(env[v] for v in inner.operands))))
        raise AssertionError("a jx.fused body ends in jx.yield")


@dataclass(frozen=True)
class FusePass(ModulePass):
    """Groups elementwise chains into `jx.fused` ops in every block, loop bodies and branches included."""

    name = "jx-fuse"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        blocks = [b for inner in op.walk() if not isinstance(inner, jx.FusedOp) for r in inner.regions for b in r.blocks]
        for block in blocks:
            fuse_block(block)
