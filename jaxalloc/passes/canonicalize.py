"""`jx-canonicalize`: rewrites that remove values a jaxpr spells out and XLA would never keep.

A jaxpr writes out every layout change and round trip that XLA's algebraic simplifier folds away
before it assigns buffers: a transpose feeding a matmul becomes the matmul's dimension numbers, a
transpose of a transpose one transpose (or none), a round trip through a wider type nothing, a
broadcast into an elementwise op the op's own implicit broadcasting, a division by a scalar a
product with its reciprocal, a reduction over dimensions of size 1 a reshape (a view), a loop
result that is always its init operand that operand, a split one slice per part (which fusions
read in place), a loop of one round its body (and one of at most one round a case, whose result
carries nothing round). A value that only constants determine becomes a constant, as XLA's
constant folding makes it (`constant_folding`, run first where the side table holds the
constants' arrays). Each rewrite gives the values `jax.jit` gives (XLA rewrites the same way) and
keeps a value alive longer only in place of a removed one at least as large, so no plan after it
needs more memory; but for the case of a loop of at most one round, whose result and branch
values may be alive together where the loop's ring held them in turn (21 of random programs
0-50,399 plan a larger arena after it, 1,238 a smaller one).

Two rewrites go further than XLA: the gradient of a max or min pool whose windows tile its input
becomes selects XLA fuses into one kernel, where XLA's own expansion of it keeps index arrays the
size of the input (`pool_gradient`); random bits of a Threefry key become their hash spelled out
round by round, which fuses, where JAX's CPU lowering loops with state the size of the draw
(`random_bits`).
Both spell out elementwise chains whose links a plan holds until `jx-fuse` fuses them: the bound
after this pass alone may rise (the flax nnx training step's from 4.50 to 6.25 MiB), and after
`jx-fuse` it is at most what it was (2.72 MiB).

A rewrite that binds a primitive with new parameters adds a binding to the side table
(`BindTable`) where there is one. IR read from text (`xdsl-opt`) has none: the rewritten op then
takes a fresh key, and its printed `params` change the same way in both cases.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax import lax
from jax.extend.core import Literal
from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, ModuleOp, StringAttr, TensorType, i32
from xdsl.ir import Block, Operation, Region, SSAValue, Use
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)
from xdsl.rewriter import InsertPoint

from jaxalloc.dialects import jx
from jaxalloc.frontend.bindings import Binding, BindTable
from jaxalloc.frontend.convert import const_op, const_text, glue_jaxpr, printable_params
from jaxalloc.frontend.types import dtype_of, tensor_type
from jaxalloc.passes import pool_gradient, random_bits
from jaxalloc.passes.constant_folding import fold_constants
from jaxalloc.passes.dead_code import DeadCodePass
from jaxalloc.passes.printed_params import UNREADABLE, printed_param
from jaxalloc.analysis.liveness import defined_in

IMPLICIT_BROADCAST = frozenset(
    {
        "add", "and", "atan2", "div", "eq", "ge", "gt", "igamma", "igammac", "le", "lt",
        "max", "min", "mul", "ne", "nextafter", "or", "pow", "rem", "shift_left",
        "shift_right_arithmetic", "shift_right_logical", "sub", "xor",
    }
)
"""Binary elementwise primitives that broadcast a smaller operand themselves: a rank-0 one, or one of
the result's rank with size 1 where the result is larger (`select_n`, `clamp` and autodiff's
`add_any` do not)."""

REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or", "reduce_xor"})
"""Reductions whose value over one element is that element (XLA folds them into a reshape)."""


@dataclass
class Rebinder:
    """Reads the bind parameters of ops and makes the keys of the ops rewrites create: new entries
    of the side table, or fresh keys past the module's largest where there is no table."""

    table: BindTable | None
    next_key: int

    @classmethod
    def of(cls, module: ModuleOp, table: BindTable | None) -> Rebinder:
        if table is not None:
            return cls(table, len(table.entries))
        keys = [op.key.data for op in module.walk() if isinstance(op, jx.PrimOp | jx.ConstOp)]
        return cls(None, max(keys, default=-1) + 1)

    def param(self, op: jx.PrimOp, name: str) -> Any:
        """A bind parameter of `op`: from the table, else parsed from its printed form; None where
        it is None (not printed), `UNREADABLE` where the printed form does not parse."""
        if self.table is not None:
            return self.table[op.key.data].params.get(name)
        return printed_param(op, name)

    def _key(self, primitive, params: dict[str, Any]) -> int:
        if self.table is not None:
            return self.table.add(Binding(primitive, params))
        self.next_key += 1
        return self.next_key - 1

    def rebuild(self, op: jx.PrimOp, operands, result_type, **changes) -> jx.PrimOp:
        """`op`'s primitive applied to `operands`, with the parameters `changes` names changed."""
        key, printed = op.key.data, dict(op.params.data)
        if changes:
            binding = self.table[key] if self.table is not None else Binding(None, {})
            key = self._key(binding.primitive, {**binding.params, **changes})
            shown = printable_params(changes)
            for name in changes:  # in place, so the params print in their order
                if name in shown:
                    printed[name] = StringAttr(shown[name])
                else:
                    printed.pop(name, None)
        return _located(jx.PrimOp(op.primitive.data, key, operands, [result_type], DictionaryAttr(printed)), op)

    def prim(self, primitive, params: dict[str, Any], operands, result_type, like: Operation) -> jx.PrimOp:
        """`primitive` bound with `params` to `operands`, at `like`'s source line."""
        key = self._key(primitive, dict(params))
        return _located(jx.PrimOp(primitive.name, key, operands, [result_type], printable_params(params)), like)

    def inline(self, fn, args: list[SSAValue], rewriter: PatternRewriter, like: Operation, **static) -> list[SSAValue]:
        """The ops of `fn`'s jaxpr on `args` (`static` its keyword arguments), inserted before `like`
        at its source line; the values of its outputs."""
        closed = glue_jaxpr(fn, args, **static)
        env: dict[Any, SSAValue] = dict(zip(closed.jaxpr.invars, args, strict=True))

        def constant(value, aval) -> SSAValue:
            if self.table is not None:
                op = const_op(self.table, value, aval)
            else:
                op = jx.ConstOp(self._key(None, {}), tensor_type(aval), const_text(np.asarray(value)))
            rewriter.insert(op, InsertPoint.before(like))
            return op.res

        env.update((var, constant(value, var.aval)) for var, value in zip(closed.jaxpr.constvars, closed.consts))

        def read(atom) -> SSAValue:
            return constant(atom.val, atom.aval) if isinstance(atom, Literal) else env[atom]

        for eqn in closed.jaxpr.eqns:
            (out,) = eqn.outvars
            op = self.prim(eqn.primitive, eqn.params, [read(a) for a in eqn.invars], tensor_type(out.aval), like)
            rewriter.insert(op, InsertPoint.before(like))
            env[out] = op.res[0]
        return [read(v) for v in closed.jaxpr.outvars]

    def reciprocal(self, constant: jx.ConstOp) -> jx.ConstOp | None:
        """The constant 1 / `constant` where that is a float scalar (read from its printed form where
        there is no table: a scalar prints exactly), as XLA evaluates it: the quotient in a type
        at least twice as precise (float32 for a 16-bit float, as XLA computes those), whose
        rounding to the narrower type is the correctly rounded quotient."""
        if _shape(constant.res) != ():
            return None
        if self.table is not None:
            value = self.table[constant.key.data]
        else:
            try:
                shown = constant.value.data if constant.value is not None else ""
                value = np.asarray(float(shown), dtype_of(constant.res.type.element_type))
            except ValueError:  # not shown, or not a number
                return None
        array = np.asarray(value)
        wide = np.float64 if array.dtype.itemsize >= 4 else np.float32
        with np.errstate(divide="ignore", over="ignore"):
            inverse = (wide(1.0) / array.astype(wide)).astype(array.dtype)
        if self.table is not None:
            return const_op(self.table, inverse, jax.typeof(value))
        return jx.ConstOp(self._key(None, {}), constant.res.type, const_text(inverse))

    def reshape(self, value: SSAValue, shape: tuple[int, ...], like: Operation) -> jx.PrimOp:
        """A `reshape` of `value` to `shape` (a view: it takes no memory), at `like`'s source line."""
        primitive, params = _reshape_binding(_shape(value), shape)
        key = self._key(primitive, dict(params))
        result_type = TensorType(value.type.element_type, shape)
        return _located(jx.PrimOp("reshape", key, [value], [result_type], printable_params(params)), like)


@functools.lru_cache(maxsize=None)
def _reshape_binding(source: tuple[int, ...], shape: tuple[int, ...]):
    """The primitive and bind parameters of `lax.reshape` from `source` to `shape`, as JAX traces it."""
    (eqn,) = jax.make_jaxpr(lambda x: lax.reshape(x, shape))(jax.ShapeDtypeStruct(source, np.float32)).eqns
    return eqn.primitive, dict(eqn.params)


def _located(op: jx.PrimOp, like: Operation) -> jx.PrimOp:
    op.location = like.location
    return op


def _shape(value: SSAValue) -> tuple[int, ...]:
    return tuple(value.type.get_shape())


def _is(op: Operation | None, *names: str) -> bool:
    return isinstance(op, jx.PrimOp) and op.primitive.data in names


def _defined_by(value: SSAValue, *names: str) -> jx.PrimOp | None:
    """The op defining `value` where it is one of the primitives `names`, else None."""
    op = value.owner
    return op if _is(op, *names) else None


def _users(value: SSAValue) -> list[Operation]:
    """The ops using `value`, each once, in the order of its uses."""
    return list(dict.fromkeys(use.operation for use in value.uses))


def _replace(rewriter: PatternRewriter, op: Operation, value: SSAValue) -> None:
    """Every use of `op`'s result reads `value` instead; `op` goes."""
    rewriter.replace(op, [], [value])


def _unset(op: jx.PrimOp, rebind: Rebinder, *names: str) -> bool:
    """Whether the parameters `names` of `op` are all None (no sharding, no reshape that transposes
    first): the rewrites handle only those."""
    return all(rebind.param(op, name) is None for name in names)


@dataclass
class TransposeIntoDot(RewritePattern):
    """A transpose read only by `dot_general`s becomes their dimension numbers. A transposed operand
    only changes which of its dimensions contract, batch or stay free; the free ones appear in the
    result in the operand's own order, so the fold applies where the transpose keeps their order."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "transpose") or not op.res[0].uses:
            return
        perm = self.rebind.param(op, "permutation")
        if not isinstance(perm, tuple):
            return
        folded = []
        for dot in _users(op.res[0]):
            dims = self.rebind.param(dot, "dimension_numbers") if _is(dot, "dot_general") else None
            for side in (0, 1):
                if isinstance(dims, tuple) and dot.args[side] is op.res[0]:
                    dims = _fold_operand(dims, side, perm)
            if not isinstance(dims, tuple):
                return
            folded.append((dot, dims))
        for dot, dims in folded:
            operands = [op.args[0] if v is op.res[0] else v for v in dot.args]
            rewriter.replace(dot, self.rebind.rebuild(dot, operands, dot.res[0].type, dimension_numbers=dims))
        rewriter.erase(op)


def _fold_operand(dims: tuple, side: int, perm: tuple[int, ...]) -> tuple | None:
    """`dot_general` dimension numbers reading the transpose's operand at `side` (0: lhs) instead
    of the transpose by `perm`, or None where its free dimensions would come out in another order."""
    (contract, batch) = dims[0][side], dims[1][side]
    free = [perm[d] for d in range(len(perm)) if d not in contract and d not in batch]
    if free != sorted(free):
        return None
    contract, batch = tuple(perm[d] for d in contract), tuple(perm[d] for d in batch)
    return (_put(dims[0], side, contract), _put(dims[1], side, batch))


def _put(pair: tuple, side: int, value: tuple) -> tuple:
    return (value, pair[1]) if side == 0 else (pair[0], value)


@dataclass
class DotIntoTranspose(RewritePattern):
    """A transpose that swaps a `dot_general` result's lhs and rhs free dimensions (the weight
    gradient of a matmul, `(x.T @ g).T`) becomes the `dot_general` with its operands swapped."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        dot = _defined_by(op.args[0], "dot_general") if _is(op, "transpose") else None
        if dot is None or not dot.res[0].has_one_use():
            return
        perm, dims = self.rebind.param(op, "permutation"), self.rebind.param(dot, "dimension_numbers")
        precision = self.rebind.param(dot, "precision")
        if not isinstance(perm, tuple) or not isinstance(dims, tuple) or precision is UNREADABLE:
            return
        (lhs_contract, rhs_contract), (lhs_batch, rhs_batch) = dims
        lhs, rhs = dot.args
        batch = len(lhs_batch)
        lhs_free = len(_shape(lhs)) - len(lhs_contract) - batch
        rhs_free = len(_shape(rhs)) - len(rhs_contract) - batch
        middle = batch + lhs_free
        if perm != (*range(batch), *range(middle, middle + rhs_free), *range(batch, middle)):
            return
        changes: dict[str, Any] = {"dimension_numbers": ((rhs_contract, lhs_contract), (rhs_batch, lhs_batch))}
        if isinstance(precision, tuple):
            changes["precision"] = precision[::-1]
        swapped = self.rebind.rebuild(dot, [rhs, lhs], op.res[0].type, **changes)
        rewriter.insert(swapped, InsertPoint.before(dot))
        _replace(rewriter, op, swapped.res[0])
        rewriter.erase(dot)


@dataclass
class ComposeTransposes(RewritePattern):
    """A transpose of a transpose read only there is one transpose, or none where they cancel."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "transpose"):
            return
        perm = self.rebind.param(op, "permutation")
        if not isinstance(perm, tuple):
            return
        if perm == tuple(range(len(perm))):
            _replace(rewriter, op, op.args[0])
            return
        inner = _defined_by(op.args[0], "transpose")
        first = self.rebind.param(inner, "permutation") if inner is not None else None
        if not isinstance(first, tuple) or not inner.res[0].has_one_use():
            return
        composed = tuple(first[d] for d in perm)
        if composed == tuple(range(len(composed))):
            _replace(rewriter, op, inner.args[0])
        else:
            rewriter.replace(op, self.rebind.rebuild(op, [inner.args[0]], op.res[0].type, permutation=composed))
        rewriter.erase(inner)


@dataclass
class ComposeReshapes(RewritePattern):
    """A reshape (or squeeze) of a reshape (or squeeze) is one reshape, and one to its operand's
    shape is its operand. Reshapes are views, so this removes values, not memory."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not self.plain(op):
            return
        if _shape(op.args[0]) == _shape(op.res[0]):
            _replace(rewriter, op, op.args[0])
            return
        inner = op.args[0].owner
        if not self.plain(inner):
            return
        source = inner.args[0]
        if _shape(source) == _shape(op.res[0]):  # the pair cancels
            _replace(rewriter, op, source)
        elif _is(op, "reshape"):
            rewriter.replace(op, self.rebind.rebuild(op, [source], op.res[0].type))
        else:
            rewriter.replace(op, self.rebind.reshape(source, _shape(op.res[0]), like=op))
        if not inner.res[0].uses:
            rewriter.erase(inner)

    def plain(self, op: Operation | None) -> bool:
        """A squeeze, or a reshape that neither transposes first nor shards."""
        if _is(op, "squeeze"):
            return True
        return _is(op, "reshape") and _unset(op, self.rebind, "dimensions", "sharding")


@dataclass
class DropConvertRoundTrip(RewritePattern):
    """A conversion back from a type that holds every value of the original exactly (f32 -> f64 ->
    f32, i8 -> i32 -> i8, bool -> f32 -> bool) is the original value; f32 -> f16 -> f32 is not."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        inner = _defined_by(op.args[0], "convert_element_type") if _is(op, "convert_element_type") else None
        if inner is None or not inner.res[0].has_one_use() or inner.args[0].type != op.res[0].type:
            return
        if not _unset(op, self.rebind, "sharding") or not _unset(inner, self.rebind, "sharding"):
            return
        if not exact_widening(inner.args[0].type.element_type, inner.res[0].type.element_type):
            return
        _replace(rewriter, op, inner.args[0])
        rewriter.erase(inner)


def exact_widening(source, target) -> bool:
    """Whether every value of element type `source` converts to `target` and back unchanged."""
    if isinstance(source, jx.KeyType) or isinstance(target, jx.KeyType):
        return False
    return bool(np.can_cast(dtype_of(source), dtype_of(target), casting="safe"))


@dataclass
class BroadcastOfUnitDims(RewritePattern):
    """A broadcast that only inserts dimensions of size 1 (`x[:, None]`, keepdims) keeps the element
    count: it is a reshape, a view of its operand."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "broadcast_in_dim") or len(op.args) != 1 or not _unset(op, self.rebind, "sharding"):
            return
        source, shape = op.args[0], _shape(op.res[0])
        if math.prod(_shape(source)) != math.prod(shape):
            return
        if _shape(source) == shape:
            _replace(rewriter, op, source)
        else:
            rewriter.replace(op, self.rebind.reshape(source, shape, like=op))


@dataclass
class ImplicitBroadcast(RewritePattern):
    """A broadcast read only by binary elementwise ops whose other operand has the result's shape
    becomes their own broadcasting of a view of its operand with size-1 dimensions (or of a scalar
    itself), as in XLA, where a broadcast never has memory of its own inside a fusion."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "broadcast_in_dim") or len(op.args) != 1 or not _unset(op, self.rebind, "sharding"):
            return
        dims = self.rebind.param(op, "broadcast_dimensions")
        if not isinstance(dims, tuple) or not op.res[0].uses or not all(map(_broadcasts_implicitly, op.res[0].uses)):
            return
        source, shape = op.args[0], [1] * len(_shape(op.res[0]))
        for d, size in zip(dims, _shape(source), strict=True):
            shape[d] = size
        if not _shape(source) or _shape(source) == tuple(shape):
            _replace(rewriter, op, source)
        else:
            rewriter.replace(op, self.rebind.reshape(source, tuple(shape), like=op))


def _broadcasts_implicitly(use: Use) -> bool:
    """Whether the op of `use` would broadcast a smaller operand in its place: a binary elementwise
    op whose other operand, another value (not the broadcast read twice), has its result's shape."""
    op = use.operation
    if not _is(op, *IMPLICIT_BROADCAST) or len(op.results) != 1:
        return False
    shape, broadcast = _shape(op.results[0]), op.operands[use.index]
    return any(v is not broadcast and _shape(v) == shape for v in op.operands)


@dataclass
class DivisionAsProduct(RewritePattern):
    """A float division by a smaller operand (a scalar, or one with size-1 dimensions the op
    broadcasts) is a product with the operand's reciprocal, computed once, as XLA's simplifier
    rewrites it where the division is not fused with its operands (a result may differ from the
    quotient by one rounding, as `jax.jit`'s does then): the product fuses like any other
    elementwise op, where the division would keep its result whole (an optimizer's clipped
    gradients and bias corrections, a normalization). The reciprocal of a scalar constant is a
    constant, as XLA folds it (`x / 128.0`, a mean): computed at run time, it would be a value of
    its own in the arena, written by a kernel of its own."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "div") or len(op.args) != 2:
            return
        numerator, denominator = op.args
        result = op.res[0]
        # NumPy counts no bfloat16 as floating: XLA divides one in float32 and rounds the quotient
        # once (1,344 of 4,096 products by the reciprocal differed from jit's quotients)
        if not np.issubdtype(dtype_of(result.type.element_type), np.floating) or _shape(numerator) != _shape(result):
            return
        if math.prod(_shape(denominator)) >= math.prod(_shape(result)) or isinstance(numerator.owner, jx.ConstOp):
            return  # (XLA folds a constant's quotient whole)
        reciprocal = self.rebind.reciprocal(denominator.owner) if isinstance(denominator.owner, jx.ConstOp) else None
        if reciprocal is None:
            reciprocal = self.rebind.prim(lax.integer_pow_p, {"y": -1}, [denominator], denominator.type, like=op)
        product = self.rebind.prim(lax.mul_p, {}, [numerator, reciprocal.results[0]], result.type, like=op)
        rewriter.replace(op, [reciprocal, product])


@dataclass
class ReductionOfUnitDims(RewritePattern):
    """A reduction over dimensions of size 1 only reduces one element into each result element: a
    reshape."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, *REDUCTIONS) or len(op.args) != 1 or not _unset(op, self.rebind, "out_sharding"):
            return
        axes, source = self.rebind.param(op, "axes"), op.args[0]
        if not isinstance(axes, tuple) or any(_shape(source)[a] != 1 for a in axes):
            return
        if _shape(source) == _shape(op.res[0]):
            _replace(rewriter, op, source)
        else:
            rewriter.replace(op, self.rebind.reshape(source, _shape(op.res[0]), like=op))


@dataclass
class DropIdentities(RewritePattern):
    """`stop_gradient` only matters to differentiation, which is over once a program is traced, and
    `copy` (`jnp.array(x)`, `x.copy()`) lowers to its operand, so XLA makes no copy of a value its
    block computes, unless the block hands on both. A conversion to its operand's own type changes
    only JAX's weak type, which XLA does not keep: it is its operand where the block does not hand
    it on (a weak Python scalar argument, converted where an op reads it), else a copy. The
    conversion of a constant (`jnp.clip` converts its bounds) stays: folded, it let XLA find
    `jnp.clip(x - x, -5, 5)` in a loop's body a constant, whose write into a loop compiled into one
    kernel made it copy the arena (random programs 627 and 2224)."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "stop_gradient", "copy", "convert_element_type") or len(op.args) != 1 or op.args[0].type != op.res[0].type:
            return
        conversion = _is(op, "convert_element_type")
        if conversion and (not _unset(op, self.rebind, "sharding") or isinstance(op.args[0].owner, jx.ConstOp)):
            return
        handed_on = op.res[0] in op.parent_block().last_op.operands
        if _is(op, "stop_gradient") or _copy_droppable(op) or conversion and not handed_on:
            _replace(rewriter, op, op.args[0])


@dataclass
class LoopInvariantResult(RewritePattern):
    """A loop position whose body yields its carried value unchanged, or hands back its own init
    operand, holds that init operand after any number of rounds: its result's readers read the
    init operand, as XLA's while-loop simplifier forwards such an element of a loop's state. So
    does a position handed the carried value of such a position with the same init operand (`x`
    in `(x, y) -> (y, y)` with both `x` and `y` starting as one value): in every round both hold
    it. A loop that yields such a result into another position would otherwise keep a second value
    that is always the first (random program 22423)."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, jx.WhileOp):
            return
        for k in sorted(invariant_positions(op)):
            if op.res[k].uses:
                rewriter.replace_all_uses_with(op.res[k], op.inits[k])


def invariant_positions(loop: jx.WhileOp) -> set[int]:
    """The positions of `loop` that hold their init operand in every round: the largest set of
    positions each of which yields its carried value, its init operand, or the carried value of a
    position of the set with the same init operand (by induction on the rounds, all of them hold
    their init operands in each)."""
    body = loop.body.block
    args, yields, inits = body.args, body.last_op.operands, loop.inits
    position = {arg: q for q, arg in enumerate(args)}
    source = {}
    for k, (value, init) in enumerate(zip(yields, inits)):
        if value is args[k] or value is init:
            source[k] = k
        elif value in position and inits[position[value]] is init:
            source[k] = position[value]
    while dropped := {k for k, q in source.items() if q not in source}:
        source = {k: q for k, q in source.items() if k not in dropped}
    return set(source)


@dataclass
class CaseInvariantResult(RewritePattern):
    """A case result that every branch yields as one value from outside the case is that value,
    whichever branch runs: its readers read it. Kept, it is a second value that is always the first,
    which a loop yielding it has to move into its ring (random program 3991)."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, jx.CaseOp):
            return
        for k, result in enumerate(op.res):
            values = {branch.block.last_op.operands[k] for branch in op.branches}
            if len(values) == 1 and result.uses:
                (value,) = values
                if not any(defined_in(value, branch.block) for branch in op.branches):
                    rewriter.replace_all_uses_with(result, value)


@dataclass
class OneRoundLoop(RewritePattern):
    """A loop that runs one round is its body, run once on the init operands, as XLA's while-loop
    simplifier inlines a loop of trip count 1; a loop that runs at most one round is a case on its
    condition, tested once on the init operands: branch 0 hands them back, branch 1 runs the body.
    Either way no value is carried round: a ring of slots, and a move into it, is what a result that
    may be an init operand or a value the body computes (a branch handing on its operand) cost an
    enclosing loop otherwise (random programs 22397, 36322, 42391). A condition is pure (JAX refuses
    an effect in `cond_fun`), so testing it once, or not at all where the rounds are known, changes
    no result."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not isinstance(op, jx.WhileOp) or op.said_rounds not in ((1, None), (None, 1)) or jx.has_effect(op.cond):
            return
        if op.rounds is not None:
            rewriter.replace(op, [], _inlined(rewriter, op.body.block, op.inits, InsertPoint.before(op)))
            return
        (test,) = _inlined(rewriter, op.cond.block, op.inits, InsertPoint.before(op))
        primitive, params = _index_binding()
        index = self.rebind.prim(primitive, params, [test], TensorType(i32, []), like=op)
        rewriter.insert(index, InsertPoint.before(op))
        body = Block()
        rewriter.inline_block(op.body.block, InsertPoint.at_end(body), op.inits)
        case = jx.CaseOp(index.res[0], [r.type for r in op.res], [Region(Block([jx.YieldOp(*op.inits)])), Region(body)])
        case.location = op.location
        rewriter.replace(op, case)


def _inlined(rewriter: PatternRewriter, block: Block, args, where: InsertPoint) -> list[SSAValue]:
    """Moves `block`'s ops to `where`, its arguments replaced by `args`; returns what it yielded."""
    end = block.last_op
    rewriter.inline_block(block, where, args)
    values = list(end.operands)
    rewriter.erase(end)
    return values


@functools.lru_cache(maxsize=None)
def _index_binding():
    """The primitive and bind parameters of a predicate's conversion to a case index, as JAX's `cond` binds it."""
    (eqn,) = jax.make_jaxpr(lambda p: lax.convert_element_type(p, np.int32))(jax.ShapeDtypeStruct((), np.bool_)).eqns
    return eqn.primitive, dict(eqn.params)


MARKERS = frozenset({"nonbatchable", "nondifferentiable_backward", "nontraceable", "select_if_vmap"})
"""Equinox's primitives that only matter to `vmap` or `grad`: outside them each is its operand (the
first after `select_if_vmap`'s predicate), and XLA sees them as that (`mlir.lower_fun` of the impl)."""

UNVMAPPED = {"unvmap_any": lax.reduce_or, "unvmap_all": lax.reduce_and, "unvmap_max": lax.reduce_max}
"""Equinox's reductions across a `vmap`'s batch: outside one, a reduction over every dimension."""


@dataclass
class DropTransformMarkers(RewritePattern):
    """A traced program is past `vmap` and `grad`, so equinox's markers for them (a `while_loop`'s
    `select_if_vmap`, `nonbatchable`, `unvmap_any`, ...) are their operands, or the plain reductions
    they reduce to: XLA keeps no value of theirs, and the ops around them fuse as they do in XLA."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if _is(op, *MARKERS) and len(op.res) == 1:
            value = op.args[1] if _is(op, "select_if_vmap") and len(op.args) == 3 else op.args[0]
            if value.type == op.res[0].type:
                _replace(rewriter, op, value)
        elif _is(op, *UNVMAPPED) and len(op.args) == 1 and len(op.res) == 1:
            source = op.args[0]
            if source.type == op.res[0].type and not _shape(source):
                _replace(rewriter, op, source)
            elif source.type.element_type == op.res[0].type.element_type and not _shape(op.res[0]):
                primitive, params = _reduction_binding(op.primitive.data, _shape(source), dtype_of(source.type.element_type))
                rewriter.replace(op, self.rebind.prim(primitive, params, [source], op.res[0].type, like=op))


@functools.lru_cache(maxsize=None)
def _reduction_binding(name: str, shape: tuple[int, ...], dtype):
    """The primitive and bind parameters of the reduction over every dimension that `name` is."""
    reduce = UNVMAPPED[name]
    (eqn,) = jax.make_jaxpr(lambda x: reduce(x, tuple(range(len(shape)))))(jax.ShapeDtypeStruct(shape, dtype)).eqns
    return eqn.primitive, dict(eqn.params)


@dataclass
class PoolGradientAsSelects(RewritePattern):
    """The gradient of a max or min pool whose windows tile its operand (`select_and_scatter_add`)
    is the elementwise selects `pool_gradient.routed_gradient` spells out, which XLA fuses into
    one kernel of no temp, where it expands the op into index arrays the size of the operand
    (11 MiB for a CNN's first pool)."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "select_and_scatter_add") or len(op.args) != 2 or len(op.res) != 1:
            return
        select = op.params.data.get("select_prim")
        window = self.rebind.param(op, "window_dimensions")
        source, operand = op.args
        if select is None or select.data not in pool_gradient.SELECTS or window is UNREADABLE or not pool_gradient.tiles(
            _shape(source), _shape(operand), window, self.rebind.param(op, "window_strides"), self.rebind.param(op, "padding")
        ):
            return
        (value,) = self.rebind.inline(pool_gradient.routed_gradient, [source, operand], rewriter, op,
                                      window=tuple(window), select=select.data)
        _replace(rewriter, op, value)


@dataclass
class RandomBitsAsHash(RewritePattern):
    """Random bits of a Threefry key are the hash `random_bits.unrolled_bits` spells out round by
    round, elementwise arithmetic on each element's index that XLA fuses into the op reading the
    bits, where JAX's CPU lowering loops over the rounds with state the size of the draw (3 MiB of
    XLA's temp for a 1 MiB dropout mask)."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "random_bits") or len(op.args) != 1 or len(op.res) != 1:
            return
        key = op.args[0].type.element_type
        bit_width, shape = self.rebind.param(op, "bit_width"), self.rebind.param(op, "shape")
        if not isinstance(key, jx.KeyType) or _shape(op.args[0]) or not random_bits.unrollable(key.impl.data, bit_width, shape):
            return
        (value,) = self.rebind.inline(random_bits.unrolled_bits, [op.args[0]], rewriter, op, bit_width=bit_width, shape=shape)
        _replace(rewriter, op, value)


@dataclass
class SplitAsSlices(RewritePattern):
    """A `split` whose parts lie whole one after another in memory (along its first dimension of more
    than one element) is one `slice` per part, as JAX lowers it for XLA: each part is then an op of
    its own, which `jx-fuse` may compute inside the fusions that read it (XLA reads a slice of its
    operand in place where it fuses one), so that no part is copied out of the value it splits (a
    GRU's gates). Parts across rows stay a split: read in place, the LSTM's four gates of a batch
    made its scan's warm call 1.8 times jit's, where copied out it is 1.2 to 1.4."""

    rebind: Rebinder

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if not _is(op, "split") or len(op.args) != 1:
            return
        axis, shape = self.rebind.param(op, "axis"), _shape(op.args[0])
        if not isinstance(axis, int) or math.prod(shape[:axis]) != 1:
            return
        start, parts = 0, []
        for result in op.res:
            size = _shape(result)[axis]
            starts = tuple(start if d == axis else 0 for d in range(len(shape)))
            limits = tuple(start + size if d == axis else n for d, n in enumerate(shape))
            params = {"start_indices": starts, "limit_indices": limits, "strides": None}
            parts.append(self.rebind.prim(lax.slice_p, params, [op.args[0]], result.type, like=op))
            start += size
        rewriter.replace(op, parts, [part.res[0] for part in parts])


def _copy_droppable(op: Operation) -> bool:
    """Whether `op` copies a value nothing else reads, or one its own block computes and does not
    also hand on: reading that value instead changes no result and never yields one value twice. A
    copy of a value from elsewhere (an argument, a constant, a value a loop carries or an enclosing
    block computes), or of one the block yields too, is where the program keeps two of them, as
    XLA's copy insertion would."""
    source = op.args[0]
    if not isinstance(source.owner, Operation) or isinstance(source.owner, jx.ConstOp):
        return False
    if len(_users(source)) == 1:
        return True
    block = op.parent_block()
    return source.owner.parent_block() is block and source not in block.last_op.operands


PATTERNS = (
    TransposeIntoDot,
    DotIntoTranspose,
    ComposeTransposes,
    ComposeReshapes,
    DropConvertRoundTrip,
    BroadcastOfUnitDims,
    ImplicitBroadcast,
    DivisionAsProduct,
    ReductionOfUnitDims,
    DropIdentities,
    DropTransformMarkers,
    LoopInvariantResult,
    CaseInvariantResult,
    OneRoundLoop,
    SplitAsSlices,
    PoolGradientAsSelects,
    RandomBitsAsHash,
)
"""Every rewrite of `jx-canonicalize`, tried in this order on each op."""


def canonicalize(module: ModuleOp, table: BindTable | None = None, patterns=PATTERNS) -> None:
    """Fold what only constants determine (where `table` holds their arrays), apply `patterns`
    everywhere in `module` (loop bodies and branches included) until none applies, then remove what
    the rewrites left unread (`jx-dce`); new bindings go into `table` where there is one."""
    if table is not None:
        fold_constants(module, table)
    rebind = Rebinder.of(module, table)
    applier = GreedyRewritePatternApplier([pattern(rebind) for pattern in patterns], dce_enabled=False)
    PatternRewriteWalker(applier, apply_recursively=True).rewrite_module(module)
    DeadCodePass().apply(Context(), module)


@dataclass(frozen=True)
class CanonicalizePass(ModulePass):
    """Removes the values of transposes, round trips, broadcasts and reshapes that XLA folds away.

    `planned(f, passes=("jx-canonicalize",))` runs it with the module's side table, so that the ops
    it rebinds run; on IR text alone they only print."""

    name = "jx-canonicalize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        canonicalize(op)
