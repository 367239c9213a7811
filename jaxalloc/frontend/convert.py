"""jaxpr -> jx: a ClosedJaxpr becomes a module with one `jx.func`.

Call-like primitives (jit, remat, custom_jvp/vjp calls, closed_call) are inlined, so the
planner sees every intermediate. `scan` and `while` become `jx.while`, `cond` becomes
`jx.case`; every other primitive, higher-order or not, is one opaque `jx.prim` bound whole.
The small glue a scan needs (counter, `xs[i]`, `ys[i] = y`) is traced from `jax.lax` so it
binds exactly as JAX would.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax._src import core, source_info_util
from jax._src.lax import lax as lax_internal
from xdsl.builder import Builder, InsertPoint
from xdsl.dialects.builtin import FileLineColLoc, IntAttr, ModuleOp, StringAttr, UnknownLoc
from xdsl.ir import Block, Region, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.frontend.bindings import Binding, BindTable
from jaxalloc.frontend.types import dtype_of, tensor_type

_INLINED_JAXPR_PARAM = {
    "jit": "jaxpr",
    "closed_call": "call_jaxpr",
    "call": "call_jaxpr",
    "remat2": "jaxpr",
    "custom_jvp_call": "call_jaxpr",
    "custom_vjp_call": "call_jaxpr",
    "planned_call": "jaxpr",  # a planned function calling another: one program, one arena
}


@dataclass(frozen=True)
class Converted:
    """A converted function: the module and the side table its keys point into."""

    module: ModuleOp
    table: BindTable

    @property
    def func(self) -> jx.FuncOp:
        return next(op for op in self.module.ops if isinstance(op, jx.FuncOp))


def convert(closed: core.ClosedJaxpr, name: str = "main") -> Converted:
    """Convert a ClosedJaxpr to a module holding one `jx.func` named `name`."""
    table = BindTable()
    inputs = [tensor_type(v.aval) for v in closed.jaxpr.invars]
    outputs = [tensor_type(v.aval) for v in closed.jaxpr.outvars]
    func = jx.FuncOp(name, inputs, outputs)
    converter = _Converter(table, core.JaxprPpContext())
    block = func.body.block
    converter.name_all(block.args, closed.jaxpr.invars)
    results = converter.inline(block, closed.jaxpr, closed.consts, list(block.args))
    Builder(InsertPoint.at_end(block)).insert(jx.YieldOp(*results))
    return Converted(ModuleOp([func]), table)


def printable_params(params: dict[str, Any]) -> dict[str, str]:
    """A primitive's parameters as `jx.prim` shows them: readable strings, None left out."""
    return {k: _printable(v) for k, v in params.items() if v is not None}


def _printable(value: Any) -> str:
    if isinstance(value, (core.Jaxpr, core.ClosedJaxpr)):
        jaxpr = value.jaxpr if isinstance(value, core.ClosedJaxpr) else value
        return f"<jaxpr with {len(jaxpr.eqns)} equations>"
    if isinstance(value, tuple) and any(isinstance(v, (core.Jaxpr, core.ClosedJaxpr)) for v in value):
        return "(" + ", ".join(_printable(v) for v in value) + ")"
    if isinstance(value, np.dtype) or isinstance(value, type):
        return getattr(value, "name", None) or value.__name__
    if callable(value):
        return getattr(value, "__name__", type(value).__name__)
    text = str(value)
    if isinstance(value, lax.ConvDimensionNumbers):
        return text  # whole: the layout decides how XLA runs the convolution (`library_graphs`)
    return text if len(text) <= 80 else text[:77] + "..."


def const_op(table: BindTable, value: Any, aval) -> jx.ConstOp:
    """A `jx.const` of `value`, typed as `aval`, its array a new entry of `table`."""
    return jx.ConstOp(table.add(_constant(value, aval)), tensor_type(aval), const_text(value))


def _constant(value: Any, aval) -> Any:
    """A constant as the jax array JAX computes with: jaxpr literals are Python-scalar-like
    (weakly typed) and closed-over constants NumPy arrays, so a constant that is an output
    would otherwise not come back as `jax.jit` returns it."""
    if isinstance(value, jax.Array):
        return value
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.extended):
        return jnp.asarray(value)
    if not aval.weak_type and isinstance(value, np.ndarray | np.generic) and value.dtype == aval.dtype:
        return jax.device_put(value)  # as it is: converting it would compile an XLA kernel per shape
    return lax_internal._convert_element_type(jnp.asarray(value), aval.dtype, aval.weak_type)


def const_text(value: Any) -> str | None:
    """A short rendering of small constants, shown in the IR for the reader (a scalar's exactly)."""
    try:
        array = np.asarray(value)
    except Exception:
        return None
    if array.dtype == object or array.size > 4:
        return None
    return np.array2string(array, separator=", ") if array.ndim else repr(array.item())


@dataclass
class _Converter:
    table: BindTable
    names: core.JaxprPpContext

    def name_all(self, values: Sequence[SSAValue], variables: Sequence[Any]) -> None:
        for value, var in zip(values, variables, strict=True):
            if isinstance(var, core.Var) and not isinstance(var, core.DropVar):
                value.name_hint = str(core.pp_var(var, self.names, print_literal_dtype=False))

    def const(self, block: Block, value: Any, aval) -> SSAValue:
        op = const_op(self.table, value, aval)
        Builder(InsertPoint.at_end(block)).insert(op)
        return op.res

    def inline(
        self, block: Block, jaxpr: core.Jaxpr, consts: Sequence[Any], args: Sequence[SSAValue], locate: bool = True
    ) -> list[SSAValue]:
        """Emit `jaxpr`'s equations at the end of `block`; return the values of its outputs.

        `locate=False` (jaxalloc's own glue) leaves the ops without a source line: they take the
        line of the equation they serve.
        """
        env: dict[core.Var, SSAValue] = {}
        for var, value in zip(jaxpr.constvars, consts, strict=True):
            env[var] = self.const(block, value, var.aval)
            self.name_all([env[var]], [var])
        env.update(zip(jaxpr.invars, args, strict=True))

        def read(atom) -> SSAValue:
            if isinstance(atom, core.Literal):
                return self.const(block, atom.val, atom.aval)
            return env[atom]

        for eqn in jaxpr.eqns:
            args = [read(a) for a in eqn.invars]
            before = block.last_op
            results = self.equation(block, eqn, args)
            if locate:
                _locate(block, before, eqn)
            # an inlined call or an empty scan may hand an operand back unchanged: it keeps its name
            forwarded = set(args)
            renamed = [(r, v) for r, v in zip(results, eqn.outvars, strict=True) if r not in forwarded]
            self.name_all([r for r, _ in renamed], [v for _, v in renamed])
            env.update((v, r) for v, r in zip(eqn.outvars, results, strict=True) if not isinstance(v, core.DropVar))
        return [read(v) for v in jaxpr.outvars]

    def equation(self, block: Block, eqn: core.JaxprEqn, args: list[SSAValue]) -> Sequence[SSAValue]:
        name = eqn.primitive.name
        inner = _INLINED_JAXPR_PARAM.get(name)
        if inner is not None and inner in eqn.params:
            return self.inline_call(block, eqn.params[inner], args)
        if name == "scan":
            return self.scan(block, eqn, args)
        if name == "while":
            return self.while_loop(block, eqn, args)
        if name == "cond":
            return self.cond(block, eqn, args)
        return self.prim(block, eqn.primitive, eqn.params, args, [v.aval for v in eqn.outvars], bool(eqn.effects))

    def prim(self, block: Block, primitive, params, args, out_avals, has_effect: bool = False) -> Sequence[SSAValue]:
        key = self.table.add(Binding(primitive, dict(params)))
        op = jx.PrimOp(primitive.name, key, args, [tensor_type(a) for a in out_avals], printable_params(params), has_effect)
        Builder(InsertPoint.at_end(block)).insert(op)
        return op.results

    def inline_call(self, block: Block, callee, args: Sequence[SSAValue]) -> list[SSAValue]:
        if isinstance(callee, core.ClosedJaxpr):
            return self.inline(block, callee.jaxpr, callee.consts, args)
        return self.inline(block, callee, (), args)

    def glue(self, block: Block, fn: Callable, *args: SSAValue, **static) -> list[SSAValue]:
        """Inline the jaxpr of a small jax.lax helper applied to `args`."""
        closed = glue_jaxpr(fn, args, **static)
        return self.inline(block, closed.jaxpr, closed.consts, args, locate=False)

    def region(self, arg_types, emit: Callable[[Block], Sequence[SSAValue]]) -> Region:
        block = Block(arg_types=arg_types)
        results = emit(block)
        Builder(InsertPoint.at_end(block)).insert(jx.YieldOp(*results))
        return Region(block)

    def while_loop(self, block: Block, eqn: core.JaxprEqn, args: list[SSAValue]) -> Sequence[SSAValue]:
        p = eqn.params
        cond_consts, rest = args[: p["cond_nconsts"]], args[p["cond_nconsts"] :]
        body_consts, inits = rest[: p["body_nconsts"]], rest[p["body_nconsts"] :]
        types = [v.type for v in inits]
        cond_jaxpr, body_jaxpr = p["cond_jaxpr"], p["body_jaxpr"]
        # vmap of a while with a batched predicate: the loop runs while any lane's predicate
        # holds, and a round updates only the lanes whose predicate holds (as JAX lowers it)
        batched = bool(cond_jaxpr.out_avals[0].shape)

        def cond(b: Block):
            self.name_all(b.args, cond_jaxpr.jaxpr.invars[len(cond_consts) :])
            (pred,) = self.inline_call(b, cond_jaxpr, [*cond_consts, *b.args])
            return self.glue(b, _any, pred) if batched else [pred]

        def body(b: Block):
            self.name_all(b.args, body_jaxpr.jaxpr.invars[len(body_consts) :])
            if not batched:
                return self.inline_call(b, body_jaxpr, [*body_consts, *b.args])
            (pred,) = self.inline_call(b, cond_jaxpr, [*cond_consts, *b.args])
            new = self.inline_call(b, body_jaxpr, [*body_consts, *b.args])
            return [self.glue(b, _select_lanes, pred, n, old)[0] for n, old in zip(new, b.args, strict=True)]

        rounds, at_most = (None, None) if batched else counted_rounds(eqn, lambda i: most_value(args[i], self.table))
        if 0 in (rounds, at_most):  # no round runs: the loop hands back its init operands, as a scan of length 0
            return inits
        op = jx.WhileOp(inits, self.region(types, cond), self.region(types, body), rounds, at_most)
        Builder(InsertPoint.at_end(block)).insert(op)
        return _handed_back(op)

    def scan(self, block: Block, eqn: core.JaxprEqn, args: list[SSAValue]) -> Sequence[SSAValue]:
        """scan as a counted loop: round i reads xs[i] and writes ys[i] into a carried stacked buffer."""
        p = eqn.params
        length, reverse, body_jaxpr = p["length"], p["reverse"], p["jaxpr"]
        num_consts, num_carry = scan_counts(p)
        consts = args[:num_consts]
        carry_init = args[num_consts : num_consts + num_carry]
        xs = args[num_consts + num_carry :]
        ys_avals = [v.aval for v in eqn.outvars[num_carry:]]
        if length == 0:  # no round runs (and xs[i] could not even be traced): carry through, empty ys
            return [*carry_init, *(self.glue(block, _zeros, aval=aval)[0] for aval in ys_avals)]

        counter = self.const(block, np.int32(0), core.ShapedArray((), np.int32))
        counter.name_hint = "i"
        ys_init = [self.glue(block, _zeros, aval=aval)[0] for aval in ys_avals]
        inits = [counter, *carry_init, *ys_init]
        types = [v.type for v in inits]

        def cond(b: Block):
            return self.glue(b, _less_than, b.args[0], bound=length)

        def body(b: Block):
            i, carry, ys = b.args[0], list(b.args[1 : 1 + len(carry_init)]), list(b.args[1 + len(carry_init) :])
            i.name_hint = "i"
            self.name_all(carry, body_jaxpr.jaxpr.invars[len(consts) : len(consts) + len(carry)])
            index = self.glue(b, _reversed_index, i, length=length)[0] if reverse else i
            x_t = [self.glue(b, _read_row, x, index)[0] for x in xs]
            outs = self.inline_call(b, body_jaxpr, [*consts, *carry, *x_t])
            new_carry, y_t = outs[: len(carry)], outs[len(carry) :]
            new_ys = [self.glue(b, _write_row, y, row, index)[0] for y, row in zip(ys, y_t, strict=True)]
            return [self.glue(b, _increment, i)[0], *new_carry, *new_ys]

        op = jx.WhileOp(inits, self.region(types, cond), self.region(types, body), length)
        Builder(InsertPoint.at_end(block)).insert(op)
        return _handed_back(op)[1:]

    def cond(self, block: Block, eqn: core.JaxprEqn, args: list[SSAValue]) -> Sequence[SSAValue]:
        index, operands = args[0], args[1:]
        chosen = _platform_branch(eqn.params.get("branches_platforms"))
        if chosen is not None:  # `lax.platform_dependent`: the branch jit's lowering would pick
            return self.inline_call(block, eqn.params["branches"][chosen], operands)
        types = [tensor_type(v.aval) for v in eqn.outvars]
        branches = [
            self.region([], functools.partial(self.inline_call, callee=branch, args=operands))
            for branch in eqn.params["branches"]
        ]
        op = jx.CaseOp(index, types, branches)
        Builder(InsertPoint.at_end(block)).insert(op)
        return op.results


def _platform_branch(platforms: Sequence[Sequence[str] | None] | None) -> int | None:
    """The branch of a platform-dependent conditional that runs on the default backend: the first that
    names its platform, else the first for any platform, as `jax.jit` lowers one (None: not such a
    conditional, or none of its branches runs there). Every branch computes the same values, so
    only that one is planned (a `jnp.diagonal`'s branch for Pallas on TPUs took a slot of the arena
    for a mask of the whole matrix)."""
    if platforms is None:
        return None
    backend = jax.extend.backend.get_backend()
    platform = getattr(backend, "_raw_platform", backend.platform)  # what jit lowers for ("cuda", not "gpu")
    named = [k for k, names in enumerate(platforms) if names is not None and platform in names]
    return next(iter(named or [k for k, names in enumerate(platforms) if names is None]), None)


def _handed_back(op: jx.WhileOp) -> list[SSAValue]:
    """The loop's results, each replaced by the value from before the loop it always is: an init
    operand a position keeps, or one passed along positions unchanged (a swap, a rotation) for the
    known number of rounds, or a value from outside the loop a position is handed. Later ops then
    read that value itself, not a loop result that may or may not be in its memory."""
    body = op.body.block
    args, yields = list(body.args), list(body.last_op.operands)
    position = {a: j for j, a in enumerate(args)}
    results = []
    for k, result in enumerate(op.results):
        j, rounds, seen = k, op.rounds.data if op.rounds is not None else None, {}
        value = None
        while value is None:
            if yields[j] is args[j] or rounds == 0:
                value = op.inits[j]
            elif rounds is None or yields[j] not in position and op.is_ancestor(_defining_op(yields[j])):
                break  # computed in the body, or only running the loop tells which
            elif yields[j] not in position:
                value = yields[j]
            elif j in seen:  # round and round a cycle of positions: skip its whole turns
                rounds %= seen[j] - rounds
                seen.clear()
            else:
                seen[j] = rounds
                j, rounds = position[yields[j]], rounds - 1
        results.append(result if value is None else value)
    return results


def _defining_op(value: SSAValue):
    return value.owner.parent_op() if isinstance(value.owner, Block) else value.owner


def counted_rounds(eqn: core.JaxprEqn, most_of: Callable[[int], int | None]) -> tuple[int | None, int | None]:
    """The rounds of a `while_loop` that counts a carried integer up by one from a constant while it
    is less than a constant (what a `fori_loop` with constant bounds that is not a scan becomes), or
    the most it can run where such comparisons are operands of the condition's `and`s (a loop that
    also stops on a value it computes) or compare with a carried value the body keeps or a value the
    condition computes, of whose operands from outside `most_of(i)` (i: the index of the operand of
    `eqn`) knows the most: `(rounds, None)`, `(None, at_most)` or `(None, None)`, where only running
    the loop tells."""
    cond = eqn.params["cond_jaxpr"].jaxpr
    made = {v: e for e in cond.eqns for v in e.outvars}
    bounds, exact, pending = [], False, [cond.outvars[0]]
    while pending:
        test = pending.pop()
        e = made.get(test) if isinstance(test, core.Var) else None
        if e is not None and e.primitive.name == "and" and e.outvars[0].aval.dtype == np.bool_:
            pending.extend(e.invars)
        elif (e is not None and e.primitive.name == "convert_element_type"
              and e.invars[0].aval.dtype == e.outvars[0].aval.dtype == np.bool_):
            pending.append(e.invars[0])  # a weak bool made strong (`(i < 1) & ...` of a Python int counter)
        elif (counted := _counted(eqn, e, most_of)) is not None:
            bounds.append(counted[0])
            exact = counted[1] and test is cond.outvars[0]  # the comparison is the whole condition
    if not bounds:
        return None, None
    return (bounds[0], None) if exact else (None, min(bounds))


def _counted(eqn: core.JaxprEqn, test: core.JaxprEqn | None, most_of: Callable[[int], int | None]
             ) -> tuple[int, bool] | None:
    """The most rounds a `while_loop` can run while `test`, an equation of its condition, holds, and
    whether it runs that many: where `test` is `lt(carried, bound)` and the body adds a constant 1 to
    that carried integer, which starts at a constant, and `bound` is a constant (then it runs that
    many), or a carried value the body keeps, a value from outside, or one the condition computes
    from those (`jnp.clip(n, 0, 3)`), whose most `most_of` tells."""
    p = eqn.params
    cond, body = p["cond_jaxpr"].jaxpr, p["body_jaxpr"].jaxpr
    consts, carried = cond.invars[: p["cond_nconsts"]], cond.invars[p["cond_nconsts"] :]
    kept, first_init = body.invars[p["body_nconsts"] :], p["cond_nconsts"] + p["body_nconsts"]
    if test is None or test.primitive.name != "lt" or test.invars[0] not in carried:
        return None
    counter, bound = test.invars
    k = carried.index(counter)

    def most_of_input(var) -> int | None:
        if var in consts:
            return most_of(consts.index(var))
        j = carried.index(var)
        return most_of(first_init + j) if j != k and body.outvars[j] is kept[j] else None

    most, start = _most_in(cond, bound, most_of_input), _integer(eqn.invars[first_init + k])
    step = next((e for e in body.eqns if body.outvars[k] in e.outvars), None)
    if (most is None or start is None or step is None or step.primitive.name != "add"
            or step.invars[0] is not kept[k] or _integer(step.invars[1]) != 1):
        return None
    return max(0, most - start), isinstance(bound, core.Literal)


def _most_in(jaxpr: core.Jaxpr, atom, most_of_input: Callable) -> int | None:
    """The most an integer scalar `atom` of `jaxpr` can be, where its equations tell (`_most_of`,
    through inlined calls such as `jnp.clip`'s), from the most of its inputs (`most_of_input`)."""
    made = {v: e for e in jaxpr.eqns for v in e.outvars}

    def most(a) -> int | None:
        if isinstance(a, core.Literal):
            return _integer(a)
        if (e := made.get(a)) is None:
            return most_of_input(a) if a in jaxpr.invars else None
        if e.primitive.name in _INLINED_JAXPR_PARAM:
            inner = e.params[_INLINED_JAXPR_PARAM[e.primitive.name]]
            inner = getattr(inner, "jaxpr", inner)
            return _most_in(inner, inner.outvars[e.outvars.index(a)], lambda v: most(e.invars[inner.invars.index(v)]))
        return _most_of(e.primitive.name, e.invars, most, e.invars[0].aval.dtype, a.aval.dtype) if e.invars else None

    return most(atom)


def _integer(atom) -> int | None:
    """The value of a jaxpr atom that is an integer literal, else None."""
    if isinstance(atom, core.Literal) and np.issubdtype(np.asarray(atom.val).dtype, np.integer):
        return int(atom.val)
    return None


def most_value(value: SSAValue, table: BindTable) -> int | None:
    """The most an integer scalar of the IR can be, where its ops tell: a constant, the least of a
    `min` of known ones, the upper bound of a `clamp` (`jnp.clip(n, 0, 3)` as a loop's bound), an
    integer conversion that cannot wrap."""
    op = value.owner
    if isinstance(op, jx.ConstOp):
        array = np.asarray(table[op.key.data])
        return int(array) if array.shape == () and np.issubdtype(array.dtype, np.integer) else None
    if not isinstance(op, jx.PrimOp) or not op.operands:
        return None
    return _most_of(op.primitive.data, op.operands, lambda v: most_value(v, table),
                    dtype_of(op.operands[0].type.element_type), dtype_of(value.type.element_type))


def _most_of(name: str, operands, most: Callable, source, target) -> int | None:
    """The most of an integer result of primitive `name`, from the most of its operands (`most`):
    the least of a `min` of known ones, the greatest of a `max`, the upper bound of a `clamp`, an
    integer conversion (dtype `source` to `target`) that cannot wrap."""
    if name == "min":
        return min((m for v in operands if (m := most(v)) is not None), default=None)
    if name == "max":
        known = [most(v) for v in operands]
        return None if None in known else max(known)
    if name == "clamp":
        return most(operands[2])
    if (name == "convert_element_type" and np.issubdtype(source, np.integer) and np.issubdtype(target, np.integer)
            and np.can_cast(source, target, casting="safe")):
        return most(operands[0])
    return None


def scan_counts(params: dict) -> tuple[int, int]:
    """How many of a scan's operands are constants and carries. JAX 0.10 says so in `num_consts`
    and `num_carry`; later versions group the operands in the flat tree `ft_in` (consts, carries, xs)."""
    if "num_consts" in params:
        return params["num_consts"], params["num_carry"]
    consts, carries, _ = params["ft_in"].unpack()
    return len(consts), len(carries)


_PACKAGE_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _source_location(eqn: core.JaxprEqn) -> FileLineColLoc | None:
    """The innermost user frame of an equation (outside JAX and jaxalloc), as an op location."""
    traceback = eqn.source_info.traceback if eqn.source_info is not None else None
    for frame in source_info_util.user_frames(traceback):
        if not _ours(frame.file_name):
            return FileLineColLoc(StringAttr(frame.file_name), IntAttr(frame.start_line), IntAttr(frame.start_column))
    return None


@functools.cache
def _ours(file_name: str) -> bool:
    """Whether a frame's file is jaxalloc's own: asked of every equation's frames, of few files."""
    return os.path.abspath(file_name).startswith(_PACKAGE_DIR + os.sep)


def _locate(block: Block, before, eqn: core.JaxprEqn) -> None:
    """Give the ops an equation added to `block` its source line, where inner equations did not.

    Locations stay out of the printed IR (xDSL prints them only with debug info on); reports use
    them to say which line of the user's program a buffer comes from.
    """
    location = _source_location(eqn)
    if location is None:
        return
    op = block.first_op if before is None else before.next_op
    while op is not None:
        if isinstance(op.location, UnknownLoc):
            op.location = location
        op = op.next_op


def _aval_of(value: SSAValue) -> jax.ShapeDtypeStruct:
    shape = tuple(value.type.get_shape())
    element = value.type.element_type
    if isinstance(element, jx.KeyType):
        return jax.ShapeDtypeStruct(shape, jax.random.key(0, impl=element.impl.data).dtype)
    return jax.ShapeDtypeStruct(shape, dtype_of(element))


def glue_jaxpr(fn: Callable, args: Sequence[SSAValue], **static) -> core.ClosedJaxpr:
    """The jaxpr of `fn` applied to values of `args`' types, with the keyword arguments `static`."""
    return _jaxpr_of(fn, tuple(_aval_of(a) for a in args), tuple(sorted(static.items())))


@functools.lru_cache(maxsize=None)
def _jaxpr_of(fn: Callable, avals: tuple, static: tuple) -> core.ClosedJaxpr:
    return jax.make_jaxpr(functools.partial(fn, **dict(static)))(*avals)


def _zeros(*, aval):
    """A zero buffer of `aval`, weakly typed where `aval` is, so stacked ys keep scan's output type."""
    if jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key):
        impl = aval.dtype._impl
        data = lax.full((*aval.shape, *impl.key_shape), 0, np.uint32)
        return jax.random.wrap_key_data(data, impl=impl.name)
    return lax_internal._convert_element_type(lax.full(aval.shape, 0, aval.dtype), aval.dtype, aval.weak_type)


def _any(pred):
    return lax.reduce_or(pred, tuple(range(pred.ndim)))


def _select_lanes(pred, new, old):
    """`new` where the (leading-axes) lane predicate holds, else `old`."""
    return lax.select(lax.broadcast_in_dim(pred, new.shape, tuple(range(pred.ndim))), new, old)


def _less_than(i, *, bound):
    return i < bound


def _increment(i):
    return i + np.int32(1)


def _reversed_index(i, *, length):
    return np.int32(length - 1) - i


def _row_start(xs, i) -> tuple:
    return (i, *[np.int32(0)] * (xs.ndim - 1))


def _read_row(xs, i):
    """xs[i] for 0 <= i < len(xs): the counter is in range, so no index wrapping is traced."""
    row = lax.dynamic_slice_p.bind(xs, *_row_start(xs, i), slice_sizes=(1, *xs.shape[1:]))
    return lax.reshape(row, xs.shape[1:])


def _write_row(ys, y, i):
    """ys[i] = y in place (the stacked buffer is the operand that dies here)."""
    return lax.dynamic_update_slice_p.bind(ys, lax.reshape(y, (1, *y.shape)), *_row_start(ys, i))


def parse_module(text: str) -> ModuleOp:
    """Parse jx IR text (as printed) back into a module."""
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(jx.JX)
    return Parser(ctx, text).parse_module()
