"""The kernel's jaxpr with its offsets made arguments: XLA compiles each distinct fusion once, and a
read or a write of the arena whose offset is a constant inside it is distinct from every other.
Tested by `test_offsets_become_arguments`, `test_a_conditional_takes_its_branches_offsets_as_operands`
and `test_the_kernel_takes_its_offsets_as_arguments`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.extend.core
import numpy as np
from jax import lax


def offsets_as_arguments(closed: jax.extend.core.ClosedJaxpr) -> tuple[jax.extend.core.ClosedJaxpr, tuple[int, ...]]:
    """The kernel with each int32 constant that an addition takes (an offset counted from `base`)
    read from a new argument instead, one per value, after its own; and those values.

    XLA compiles each distinct fusion once, and a read or a write of the arena whose offset is a
    constant inside it is distinct from every other: with the offsets as arguments, the reads and
    writes of one shape are one fusion (the transformer training step: 676 distinct fusions of
    1,036 otherwise). A loop's body takes its offsets as constants of the loop, a conditional's
    branches as operands of the conditional. An offset counted from the kernel's own `base` (0) is
    the argument itself: an addition of two arguments that several fusions read would be a kernel
    of its own, independent of the others, and three such kernels slowed the CG solver's calls by
    about 15%."""
    words: dict[int, jax.extend.core.Var] = {}

    def argument(word: int) -> jax.extend.core.Var:
        return words.setdefault(word, _offset_var())

    jaxpr = _offsets_read(closed.jaxpr, argument, base=closed.jaxpr.invars[1])
    return jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, len(jaxpr.invars), list(words.values())), closed.consts), tuple(words)


def _offset_var() -> jax.extend.core.Var:
    return jax.extend.core.Var(jax.core.ShapedArray((), np.int32))


def _offsets_read(jaxpr, offset: Callable[[int], Any], base=None, counters=frozenset()):
    """`jaxpr` with the int32 constants of its additions read from `offset(value)` (in its loops'
    bodies and its conditionals' branches too); an addition to `base` is that value itself. The
    additions that make `counters` keep their constants."""
    renamed: dict[Any, Any] = {}

    def rename(v):
        return renamed.get(v, v) if isinstance(v, jax.extend.core.Var) else v

    eqns = []
    for eqn in jaxpr.eqns:
        eqn = eqn.replace(invars=[rename(v) for v in eqn.invars])
        if eqn.primitive is lax.add_p and any(map(_int32_constant, eqn.invars)) and eqn.outvars[0] not in counters:
            invars = [offset(int(v.val)) if _int32_constant(v) else v for v in eqn.invars]
            if base is not None and any(v is base for v in invars):
                renamed[eqn.outvars[0]] = next(v for v in invars if v is not base)
                continue
            eqn = eqn.replace(invars=invars)
        elif eqn.primitive is lax.while_p:
            eqn = _loop_offsets_read(eqn, offset)
        elif eqn.primitive is lax.cond_p:
            eqn = _branches_offsets_read(eqn, offset)
        eqns.append(eqn)
    return jaxpr.replace(eqns=eqns, outvars=[rename(v) for v in jaxpr.outvars])


def _int32_constant(v) -> bool:
    return isinstance(v, jax.extend.core.Literal) and v.aval.shape == () and v.aval.dtype == np.int32


def _loop_offsets_read(eqn, offset: Callable[[int], Any]):
    """A `while` whose body reads its offsets from constants of the loop, taken from `offset`."""
    inner: dict[int, jax.extend.core.Var] = {}
    body = eqn.params["body_jaxpr"]
    consts, nconsts = eqn.params["cond_nconsts"] + eqn.params["body_nconsts"], eqn.params["body_nconsts"]
    jaxpr = _offsets_read(body.jaxpr, lambda word: inner.setdefault(word, _offset_var()), counters=round_counters(body.jaxpr, nconsts))
    if not inner:
        return eqn
    params = dict(eqn.params, body_nconsts=nconsts + len(inner),
                  body_jaxpr=jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, nconsts, list(inner.values())), body.consts))
    return eqn.replace(invars=[*eqn.invars[:consts], *map(offset, inner), *eqn.invars[consts:]], params=params)


def _branches_offsets_read(eqn, offset: Callable[[int], Any]):
    """A `cond` whose branches read their offsets from operands of the conditional, taken from
    `offset`: each branch takes them all, after its own."""
    found: list[dict[int, jax.extend.core.Var]] = [{} for _ in eqn.params["branches"]]
    jaxprs = [_offsets_read(b.jaxpr, lambda word, mine=mine: mine.setdefault(word, _offset_var()))
              for b, mine in zip(eqn.params["branches"], found)]
    words = list(dict.fromkeys(word for mine in found for word in mine))
    if not words:
        return eqn
    branches = tuple(
        jax.extend.core.ClosedJaxpr(_with_inputs(jaxpr, len(jaxpr.invars), [mine.get(w) or _offset_var() for w in words]), b.consts)
        for b, jaxpr, mine in zip(eqn.params["branches"], jaxprs, found)
    )
    return eqn.replace(invars=[*eqn.invars, *map(offset, words)], params=dict(eqn.params, branches=branches))


def round_counters(body, nconsts: int) -> set:
    """The results of a loop's body that count a carried value up by a constant (its round): XLA
    reads the loop's trip count off that constant (`CompiledFunctions.loop`)."""
    carried = {o: i for o, i in zip(body.outvars, body.invars[nconsts:]) if isinstance(o, jax.extend.core.Var)}
    return {
        e.outvars[0] for e in body.eqns
        if e.primitive is lax.add_p and e.outvars[0] in carried and carried[e.outvars[0]] in e.invars and any(map(_int32_constant, e.invars))
    }


def _with_inputs(jaxpr, position: int, new: list):
    """`jaxpr` taking `new` inputs at `position`."""
    names = jaxpr.debug_info.arg_names
    if names is not None:
        names = (*names[:position], *("offset",) * len(new), *names[position:])
    return jaxpr.replace(invars=[*jaxpr.invars[:position], *new, *jaxpr.invars[position:]],
                         debug_info=jaxpr.debug_info._replace(arg_names=names))
