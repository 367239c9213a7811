"""`planned_call`: a planned function as a JAX primitive, so that it composes as a jitted one does.

A planned function called with a tracer among its arguments (under `jax.grad`, `jax.jit`,
`jax.vmap`, `lax.scan`, `jax.eval_shape`, ...) binds `planned_call` with the program it traced (a
closed jaxpr) and its `Options`, and never touches an arena. Each rule plans the program it derives,
as `jit`'s rules compile theirs:
- impl: the program run in its mode (the compiled kernel by default);
- abstract eval: the program's output types, so `make_jaxpr` shows one `planned_call`;
- lowering: the program as its mode runs it inside the enclosing computation (the compiled kernel
  inline, its arena a buffer there);
- JVP: the JVP program, planned; linearization (reverse mode): the forward program, which also
  returns the residuals, and the linear program of the tangents, each planned; transposition: the
  transposed program, planned;
- batching: the `vmap` of the program, planned.
No rule reads a value back through the arena's bitcasts, through which no derivative flows: a
transformation without a rule is JAX's own error, never a wrong value.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import jax
from jax._src import core, source_info_util
from jax._src.interpreters import ad, batching, mlir
from jax._src.interpreters import partial_eval as pe
from jax._src.util import weakref_lru_cache

DEFAULT_PASSES = ("jx-dce", "jx-canonicalize", "jx-fuse", "jx-schedule")
"""The passes a planned function runs unless told otherwise, in this order: the values XLA would not
keep are removed, fused or ordered away before planning. `passes=()` plans the jaxpr as traced."""


@dataclass(frozen=True)
class Options:
    """How a program is planned and run: what every program derived from a planned function shares."""

    mode: str = "compiled"
    allocator: str = "nnc"
    alignment: int = 64
    passes: tuple[str, ...] = DEFAULT_PASSES
    arena: str = "smaller"


class Runner(Protocol):
    """What runs one program with one `Options` (`jaxalloc.api`)."""

    name: str

    @property
    def plan(self):
        """The plan the program runs in its mode (a `jaxalloc.Plan`)."""

    @property
    def plan_with_outputs(self):
        """The plan of every value, outputs included, in the arena: the one that compares with XLA's
        `temp + output - alias`."""

    def run(self, flat_args: Sequence[Any]) -> Sequence[Any]:
        """The outputs for concrete arguments."""

    def inline(self, flat_args: Sequence[Any]) -> Sequence[Any]:
        """The outputs traced inside an enclosing computation: the compiled kernel inline, its arena
        a buffer there; the op-by-op run as a host callback (`host_callback`); in eager mode the
        program itself."""


planned_call_p = core.Primitive("planned_call")
planned_call_p.multiple_results = True

_runners: weakref.WeakKeyDictionary[core.ClosedJaxpr, dict[Options, Runner]] = weakref.WeakKeyDictionary()
"""The runner of each program, by the jaxpr and the options: the planned function's own for the
program it traced, one planned anew for each program a rule derives."""

def make_runner(jaxpr: core.ClosedJaxpr, options: Options, name: str) -> Runner:
    """Plans a derived program: its jaxpr, options and a name (`jaxalloc.api` puts its own here)."""
    raise NotImplementedError("import jaxalloc: jaxalloc.api plans the programs a transformation derives")


def bind(flat_args: Sequence[Any], jaxpr: core.ClosedJaxpr, options: Options, runner: Runner) -> list[Any]:
    """`planned_call` of `jaxpr` on `flat_args`, run by `runner` wherever it runs concretely."""
    _runners.setdefault(jaxpr, {})[options] = runner
    return _call(*flat_args, jaxpr=jaxpr, options=options)


_names: weakref.WeakKeyDictionary[core.ClosedJaxpr, str] = weakref.WeakKeyDictionary()
"""The name of each program a rule derived: its planned function's, then what each rule made of it
(`loss_fwd`, `loss_lin_bwd`, `loss_vmap`, ...)."""


def _name(jaxpr: core.ClosedJaxpr) -> str:
    if jaxpr in _names:
        return _names[jaxpr]
    info = jaxpr.jaxpr.debug_info
    name = info.func_name if info is not None else "program"
    return name if name.isidentifier() else "program"


def runner(jaxpr: core.ClosedJaxpr, options: Options) -> Runner:
    """What runs `jaxpr` with `options`: the planned function's own runner, or a new one."""
    by_options = _runners.setdefault(jaxpr, {})
    if options not in by_options:
        by_options[options] = make_runner(jaxpr, options, _name(jaxpr))
    return by_options[options]


def _derived(source: core.ClosedJaxpr, jaxpr: core.ClosedJaxpr, what: str) -> core.ClosedJaxpr:
    """`jaxpr`, derived from `source` as `what` (`jvp`, `fwd`, ...), named after both."""
    _names[jaxpr] = f"{_name(source)}_{what}"
    return jaxpr


def _split(values: Sequence[Any], n: int) -> tuple[list[Any], list[Any]]:
    return list(values[:n]), list(values[n:])


def _nonzero(values: Sequence[Any], nonzeros: Sequence[bool]) -> list[Any]:
    return [v for v, nz in zip(values, nonzeros) if nz]


def _with_zeros(values: Sequence[Any], nonzeros: Sequence[bool], avals: Sequence[core.AbstractValue]) -> list[Any]:
    """`values` for the nonzero entries, a symbolic zero tangent elsewhere."""
    given = iter(values)
    return [next(given) if nz else ad.Zero(a.to_tangent_aval()) for nz, a in zip(nonzeros, avals)]


# impl and types


def _impl(*args, jaxpr: core.ClosedJaxpr, options: Options):
    return list(runner(jaxpr, options).run(args))


def _abstract_eval(*avals, jaxpr: core.ClosedJaxpr, options: Options):
    return _out_avals(jaxpr, avals), jaxpr.effects


def _manual_axes(avals) -> frozenset:
    """The manual mesh axes (inside `shard_map`) any of `avals` varies over."""
    return frozenset().union(*(a.mat.varying for a in avals if isinstance(a, core.ShapedArray)))


def _out_avals(jaxpr: core.ClosedJaxpr, in_avals) -> list:
    """The program's output types; inside `shard_map`, each varies over every axis an input does."""
    vma = _manual_axes(in_avals)
    return [a.update(manual_axis_type=core.ManualAxisType(varying=vma)) if vma else a for a in jaxpr.out_avals]


def _call(*args, jaxpr: core.ClosedJaxpr, options: Options) -> list:
    """`planned_call` of `jaxpr`. Inside `shard_map` every input is first cast to vary over every
    manual axis any input varies over: the program computes each shard's outputs from all its
    inputs, and the cast of an input that does not vary transposes to the `psum` of its cotangent
    that a gradient needs."""
    return planned_call_p.bind(*core.auto_insert_reshard(*args), jaxpr=jaxpr, options=options)


planned_call_p.def_impl(_impl)
planned_call_p.def_effectful_abstract_eval(_abstract_eval)


def _pp(eqn: core.JaxprEqn, context, settings):
    """`planned_call[name=loss_fwd arena_bytes=... mode=compiled ...]`: what a program is and the
    arena it takes (planned as it is printed, where it was not yet), then the program."""
    options = eqn.params["options"]
    program = runner(eqn.params["jaxpr"], options)
    params = dict(name=program.name, arena_bytes=program.plan.arena_bytes, mode=options.mode,
                  allocator=options.allocator, alignment=options.alignment, jaxpr=eqn.params["jaxpr"])
    return core._pp_eqn(eqn.replace(params=params), context, settings)


core.pp_eqn_rules[planned_call_p] = _pp


def programs(jaxpr: core.Jaxpr) -> list[Runner]:
    """The runner of every `planned_call` in `jaxpr` and in the jaxprs its equations hold, in order."""
    found = []
    for eqn in jaxpr.eqns:
        if eqn.primitive is planned_call_p:
            found.append(runner(eqn.params["jaxpr"], eqn.params["options"]))
        else:
            for inner in core.jaxprs_in_params(eqn.params):
                found += programs(inner)
    return found


# lowering


def _lowering(ctx: mlir.LoweringRuleContext, *args, jaxpr: core.ClosedJaxpr, options: Options):
    """The program as its mode runs it inside an enclosing computation (`Runner.inline`)."""
    program = runner(jaxpr, options)
    return mlir.lower_fun(lambda *xs: list(program.inline(xs)), multiple_results=True)(ctx, *args)


def _is_key(aval) -> bool:
    return jax.dtypes.issubdtype(aval.dtype, jax.dtypes.prng_key)


def host_callback(run: Callable[[list[Any]], Sequence[Any]], jaxpr: core.ClosedJaxpr) -> Callable:
    """`run`, a run of `jaxpr` from Python (the op-by-op modes), as a host callback of the enclosing
    computation; typed PRNG keys cross as their data, which a callback can take and return."""

    def as_data(x, aval):
        return jax.random.key_data(x) if _is_key(aval) else x

    def as_value(x, aval):
        return jax.random.wrap_key_data(x, impl=aval.dtype._impl) if _is_key(aval) else jax.numpy.asarray(x)

    def on_host(*xs):
        outs = run([as_value(x, a) for x, a in zip(xs, jaxpr.in_avals)])
        return [as_data(x, a) for x, a in zip(outs, jaxpr.out_avals)]

    shapes = [jax.eval_shape(functools.partial(as_data, aval=a), jax.ShapeDtypeStruct(a.shape, a.dtype))
              for a in jaxpr.out_avals]

    def fun(*xs):
        outs = jax.pure_callback(on_host, shapes, *(as_data(x, a) for x, a in zip(xs, jaxpr.in_avals)))
        return [as_value(x, a) for x, a in zip(outs, jaxpr.out_avals)]

    return fun


mlir.register_lowering(planned_call_p, _lowering)


# forward mode


def _jvp(primals, tangents, *, jaxpr: core.ClosedJaxpr, options: Options):
    nonzeros = [type(t) is not ad.Zero for t in tangents]
    jvp_jaxpr, out_nonzeros = _jvp_program(jaxpr, tuple(nonzeros))
    outs = _call(*primals, *_nonzero(tangents, nonzeros), jaxpr=jvp_jaxpr, options=options)
    primals_out, tangents_out = _split(outs, len(jaxpr.out_avals))
    return primals_out, _with_zeros(tangents_out, out_nonzeros, jaxpr.out_avals)


@weakref_lru_cache
def _jvp_program(jaxpr: core.ClosedJaxpr, nonzeros: tuple[bool, ...]) -> tuple[core.ClosedJaxpr, list[bool]]:
    jvp_jaxpr, out_nonzeros = ad.jvp_jaxpr(jaxpr, nonzeros, instantiate=False)
    if _holds(jvp_jaxpr.jaxpr, "custom_lin"):  # a custom_vjp's linearization, which only transposes
        raise TypeError("can't apply forward-mode autodiff (jvp) to a custom_vjp function.")
    return _derived(jaxpr, jvp_jaxpr, "jvp"), out_nonzeros


def _holds(jaxpr: core.Jaxpr, primitive: str) -> bool:
    """Whether `jaxpr` or a jaxpr its equations hold binds `primitive`."""
    return any(eqn.primitive.name == primitive or any(_holds(inner, primitive) for inner in core.jaxprs_in_params(eqn.params))
               for eqn in jaxpr.eqns)


ad.primitive_jvps[planned_call_p] = _jvp


# reverse mode


def _linearize(is_vjp: bool, nonzeros: Sequence[bool], *primals, jaxpr: core.ClosedJaxpr, options: Options):
    """The forward program (outputs, then residuals) planned and run now; the linear program of the
    tangents planned where it runs (transposed, for reverse mode)."""
    forward, residuals_out, out_nonzeros, forwarded, tangent = _linear_programs(jaxpr, tuple(nonzeros), is_vjp)
    outs = _call(*primals, jaxpr=forward, options=options)
    primals_out, computed = _split(outs, len(outs) - residuals_out)
    residuals_computed = iter(computed)
    inputs = [*jaxpr.consts, *primals]
    residuals = [next(residuals_computed) if k is None else inputs[k] for k in forwarded]

    def tangent_fun(residuals, *tangents):
        outs = _call(*residuals, *_nonzero(tangents, nonzeros), jaxpr=tangent, options=options)
        return _with_zeros(outs, out_nonzeros, jaxpr.out_avals)

    return primals_out, out_nonzeros, residuals, tangent_fun


@weakref_lru_cache
def _linear_programs(jaxpr: core.ClosedJaxpr, nonzeros: tuple[bool, ...], is_vjp: bool):
    forward, residuals_out, out_nonzeros, forwarded, tangent = ad.linearize_jaxpr(jaxpr, nonzeros, is_vjp=is_vjp)
    return _derived(jaxpr, forward, "fwd"), residuals_out, out_nonzeros, forwarded, _derived(jaxpr, tangent, "lin")


ad.primitive_linearizations[planned_call_p] = _linearize


def _partial_eval(trace: pe.JaxprTrace, *tracers, jaxpr: core.ClosedJaxpr, options: Options):
    """Known inputs to known outputs and residuals, planned and run now; residuals and unknown inputs
    to unknown outputs, staged as a `planned_call` of its own (the path of a JVP partially evaluated,
    as `lax.scan` differentiates its body)."""
    unknowns = tuple(not t.pval.is_known() for t in tracers)
    known_jaxpr, unknown_jaxpr, out_unknowns, residual_avals = _partial_programs(jaxpr, unknowns)
    known_args = [t.pval.get_known() for t in tracers if t.pval.is_known()]
    outs = _call(*known_args, jaxpr=known_jaxpr, options=options)
    known_outs, residuals = _split(outs, len(outs) - len(residual_avals))
    staged_in = [*map(trace.new_instantiated_const, residuals), *(t for t in tracers if not t.pval.is_known())]
    staged_out = [pe.JaxprTracer(trace, pe.PartialVal.unknown(a), None)
                  for a in _out_avals(unknown_jaxpr, [t.aval for t in staged_in])]
    recipe = pe.new_eqn_recipe(trace, staged_in, staged_out, planned_call_p, dict(jaxpr=unknown_jaxpr, options=options),
                               unknown_jaxpr.effects, source_info_util.current())
    for t in staged_out:
        t.recipe = recipe
    knowns, unknowns_out = iter(known_outs), iter(staged_out)
    return [next(unknowns_out) if unknown else next(knowns) for unknown in out_unknowns]


@weakref_lru_cache
def _partial_programs(jaxpr: core.ClosedJaxpr, unknowns: tuple[bool, ...]):
    known, unknown, out_unknowns, residual_avals = pe.partial_eval_jaxpr_nounits(jaxpr, list(unknowns), instantiate=False)
    return _derived(jaxpr, known, "known"), _derived(jaxpr, unknown, "staged"), out_unknowns, residual_avals


pe.custom_partial_eval_rules[planned_call_p] = _partial_eval


def _params_kept(unks_in, inst_in, kept_outs_known, kept_outs_staged, num_res_out, num_res_in, params_known, params_staged):
    return params_known, params_staged


pe.partial_eval_jaxpr_custom_rules[planned_call_p] = lambda *args, **kwargs: pe.closed_call_partial_eval_custom_rule(
    "jaxpr", _params_kept, *args, **kwargs)


def _transpose(cts, *args, jaxpr: core.ClosedJaxpr, options: Options):
    """The cotangents of the linear inputs from a planned program: `jaxpr`'s backward pass."""
    linear = tuple(ad.is_undefined_primal(a) for a in args)
    nonzero_cts = tuple(type(c) is not ad.Zero for c in cts)
    backward = _transposed(jaxpr, linear, nonzero_cts)
    known = [a for a, lin in zip(args, linear) if not lin]
    outs = iter(_call(*known, *_nonzero(cts, nonzero_cts), jaxpr=backward, options=options))
    return [next(outs) if lin else None for lin in linear]


@weakref_lru_cache
def _transposed(jaxpr: core.ClosedJaxpr, linear: tuple[bool, ...], nonzero_cts: tuple[bool, ...]) -> core.ClosedJaxpr:
    """The program from the known inputs and the nonzero cotangents of `jaxpr`'s outputs to the
    cotangents of its linear inputs."""
    in_avals, out_avals = jaxpr.in_avals, jaxpr.out_avals
    n_known = linear.count(False)

    def backward(*flat):
        known, given = iter(flat[:n_known]), iter(flat[n_known:])
        primals = [ad.UndefinedPrimal(a) if lin else next(known) for a, lin in zip(in_avals, linear)]
        cts = [next(given) if nz else ad.Zero(a.to_ct_aval()) for nz, a in zip(nonzero_cts, out_avals)]
        cts_in = ad.backward_pass(jaxpr.jaxpr, False, jaxpr.consts, primals, cts)
        return [ad.instantiate_zeros(ct) for ct, lin in zip(cts_in, linear) if lin]

    avals = [*(a for a, lin in zip(in_avals, linear) if not lin), *_nonzero([a.to_ct_aval() for a in out_avals], nonzero_cts)]
    traced = jax.make_jaxpr(backward)(*(jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in avals))
    return _derived(jaxpr, traced, "bwd")


ad.primitive_transposes[planned_call_p] = _transpose


# dead code and batching


def _dce(used_outputs: list[bool], eqn: core.JaxprEqn) -> tuple[list[bool], core.JaxprEqn | None]:
    """Only the outputs used, planned as a program of their own: a gradient's unused primal outputs
    take no memory."""
    if not any(used_outputs) and not eqn.effects:
        return [False] * len(eqn.invars), None
    if all(used_outputs):
        return [True] * len(eqn.invars), eqn
    jaxpr: core.ClosedJaxpr = eqn.params["jaxpr"]
    pruned, used_inputs = pe.dce_jaxpr(jaxpr.jaxpr, used_outputs)
    closed = core.ClosedJaxpr(pruned, jaxpr.consts)
    _names[closed] = _name(jaxpr)
    params = dict(eqn.params, jaxpr=closed)
    new = pe.new_jaxpr_eqn([v for v, used in zip(eqn.invars, used_inputs) if used],
                           [v for v, used in zip(eqn.outvars, used_outputs) if used],
                           planned_call_p, params, pruned.effects, eqn.source_info, eqn.ctx)
    return used_inputs, new


pe.dce_rules[planned_call_p] = _dce


def _batch(axis_data, args, dims, *, jaxpr: core.ClosedJaxpr, options: Options):
    """The `vmap` of the program, planned, every batched operand and result on axis 0."""
    mapped = tuple(d is not None for d in dims)
    if not any(mapped):
        return _call(*args, jaxpr=jaxpr, options=options), [None] * len(jaxpr.out_avals)
    args = [batching.moveaxis(x, d, 0) if m and d != 0 else x for x, d, m in zip(args, dims, mapped)]
    batched = _batched(jaxpr, mapped, axis_data.size, axis_data.name)
    return _call(*args, jaxpr=batched, options=options), [0] * len(jaxpr.out_avals)


@weakref_lru_cache
def _batched(jaxpr: core.ClosedJaxpr, mapped: tuple[bool, ...], size: int, name) -> core.ClosedJaxpr:
    avals = [jax.ShapeDtypeStruct((size, *a.shape) if m else a.shape, a.dtype, weak_type=a.weak_type)
             for a, m in zip(jaxpr.in_avals, mapped)]
    vmapped = jax.vmap(core.jaxpr_as_fun(jaxpr), in_axes=[0 if m else None for m in mapped], axis_name=name)
    return _derived(jaxpr, jax.make_jaxpr(vmapped)(*avals), "vmap")


batching.fancy_primitive_batchers[planned_call_p] = _batch
