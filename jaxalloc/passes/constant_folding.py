"""Values computed from constants alone become constants, as XLA's constant folding makes them.

A jaxpr computes at run time what its constants determine: diffrax works out its step size, its
tolerances and its first time from Python floats before the solve, each a scalar that lives from the
start to the end of the program. XLA evaluates such ops when it compiles (`HloConstantFolding`), so
jit's temp holds none of them; a plan that computes them holds a slot of the arena for each, across
every loop of the program. Folded, they are constants beside the arguments, outside the arena, as
they are in XLA's executable.

The folded values are XLA's own: every foldable op of a function is evaluated by one `jax.jit` of
them with the constants embedded, which XLA folds with the evaluator it folds jit's constants with.
Like XLA, an op whose result has more elements than its operands together (a broadcast, an iota) is
left to run, so that no constant grows the executable, and so are ops with an effect or a callback,
copies (a copy of a constant is a value the program means to update, a loop's state), collectives
(which bind only inside their mesh axes: `shard_map` runs the planned function) and random keys.
"""

from __future__ import annotations

import jax
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from jaxalloc.dialects import jx
from jaxalloc.dialects.jx import KeyType
from jaxalloc.frontend.bindings import BindTable
from jaxalloc.frontend.convert import const_op
from jaxalloc.passes.printed_params import printed_param

NEVER_FOLDED = frozenset({"copy", "rng_uniform", "pure_callback", "io_callback", "debug_callback"})
"""Primitives left to run whatever their operands: copies (a program's fresh, mutable value), draws
from XLA's random state, and callbacks."""

QUICK_COMPILE = {"xla_backend_optimization_level": 0}
"""XLA folds the ops before its backend runs: what the backend would optimize is at most a copy of a
folded value, so it need not (half the compile time of a diffrax solve's 327 folded ops)."""

LARGEST_FOLDED = 45_000_000
"""XLA's bound on the elements of a constant it folds an op into (`HloConstantFolding`)."""


def fold_constants(module: ModuleOp, table: BindTable) -> None:
    """Replace each value of `module` that only constants determine, and that an op left to run or
    an output reads, with a `jx.const` of its value (a new entry of `table`)."""
    folded = foldable(module)
    if not folded:
        return
    inside = set(folded)
    read = [value for op in folded for value in op.results if any(use.operation not in inside for use in value.uses)]
    arrays = jax.jit(lambda: _evaluate(folded, read, table)).lower().compile(compiler_options=QUICK_COMPILE)() if read else []
    for value, array in zip(read, arrays, strict=True):
        constant = const_op(table, array, jax.typeof(array))
        Rewriter.insert_op(constant, InsertPoint.before(value.owner))
        value.replace_all_uses_with(constant.res)
    for op in reversed(folded):
        Rewriter.erase_op(op, safe_erase=False)


def foldable(module: ModuleOp) -> list[jx.PrimOp]:
    """The ops of `module` whose operands are all constants or values of such ops, in program order."""
    known: set[SSAValue] = set()
    folded = []
    for op in module.walk():
        if isinstance(op, jx.ConstOp):
            known.add(op.res)
        elif isinstance(op, jx.PrimOp) and _folds(op, known):
            folded.append(op)
            known.update(op.results)
    return folded


def _folds(op: jx.PrimOp, known: set[SSAValue]) -> bool:
    if op.effect is not None or op.primitive.data in NEVER_FOLDED or isinstance(op.parent_op(), jx.FusedOp):
        return False
    if not all(value in known for value in op.operands) or _names_an_axis(op):
        return False
    values = [*op.operands, *op.results]
    if any(isinstance(value.type.element_type, KeyType) for value in values):
        return False
    produced = sum(value.type.element_count() for value in op.results)
    return produced <= min(LARGEST_FOLDED, sum(value.type.element_count() for value in op.operands))


def _names_an_axis(op: jx.PrimOp) -> bool:
    """Whether `op` is a collective: its `axis_name` or `axes` names a mesh axis, not a dimension."""
    for name in ("axis_name", "axes"):
        named = printed_param(op, name)
        if named is not None and any(not isinstance(axis, int) for axis in (named if isinstance(named, tuple) else (named,))):
            return True
    return False


def _evaluate(folded: list[jx.PrimOp], read: list[SSAValue], table: BindTable) -> list:
    """The values `read`, the folded ops run in order on the constants' arrays."""
    env: dict[SSAValue, object] = {}

    def array(value: SSAValue):
        return env[value] if value in env else table[value.owner.key.data]

    for op in folded:
        env.update(zip(op.results, table[op.key.data].bind(*map(array, op.operands)), strict=True))
    return [env[value] for value in read]
