"""`jx-schedule`: each block reordered to lower the max-live bound, never raising it, keeping every
dependence (through regions too) and the order of effects; scheduled programs run right, checked."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

import jaxalloc
from jaxalloc.passes import schedule as scheduling
from jaxalloc.passes.schedule import ORDERS, module_bound, schedule
from jaxalloc.testing.corpus import PROGRAMS as CORPUS
from jaxalloc.testing.differential import AS_TRACED, check_program, check_random_program
from jaxalloc.testing.random_programs import random_program

SCHEDULE = ("jx-dce", "jx-schedule")


def _three_chains(x):
    a, b, c = jnp.sin(x), jnp.cos(x), jnp.exp(x)
    return a.sum() + b.sum() + c.sum()


X = jnp.linspace(-1.0, 1.0, 4096)


def _bound(fn, *args, passes) -> int:
    return jaxalloc.planned(fn, passes=passes).plan(*args, include_outputs=True).lower_bound


def test_three_chains_run_one_after_another():
    before, after = _bound(_three_chains, X, passes=AS_TRACED), _bound(_three_chains, X, passes=SCHEDULE)
    assert (before, after) == (3 * 16384 + 64, 16384 + 2 * 64)  # the arrays, and 64-byte scalars
    check_program(_three_chains, X, mode="checked", passes=SCHEDULE)


def test_the_bounds_of_every_candidate_are_reported_and_the_best_is_kept():
    module = jaxalloc.planned(_three_chains, passes=AS_TRACED).lower(X)
    bounds = schedule(module)
    assert set(bounds) == {*ORDERS, "best"}
    assert bounds["best"] == min(bounds.values()) < bounds["traced"]


def test_effects_keep_their_order():
    def f(x):
        a = jnp.sin(x)
        jax.debug.callback(lambda v: calls.append(("first", float(v))), x[0], ordered=True)
        b = jnp.cos(x)
        jax.debug.callback(lambda v: calls.append(("second", float(v))), b[0], ordered=True)
        return a.sum() + b.sum()

    calls = []
    jax.block_until_ready(jax.jit(f)(X))
    expected, calls[:] = list(calls), []
    jaxalloc.planned(f, mode="checked", passes=SCHEDULE)(X)
    assert calls == expected


def test_a_value_read_only_inside_a_branch_is_computed_before_the_case():
    def f(x, p):
        t = jnp.tanh(x) * 3.0
        u = jnp.sin(x)
        return lax_cond(p, t, u).sum() + u.sum()

    def lax_cond(p, t, u):
        return jax.lax.cond(p > 0, lambda: t * 2.0, lambda: u + 1.0)

    for p in (1.0, -1.0):
        check_program(f, X, jnp.float32(p), mode="checked", passes=SCHEDULE)


@pytest.mark.parametrize("program", CORPUS[::10], ids=lambda p: p.name)
def test_corpus_program_scheduled(program):
    args = program.make_args()
    check_program(program.fn, *args, mode="checked", name=program.name, passes=SCHEDULE)
    assert _bound(program.fn, *args, passes=SCHEDULE) <= _bound(program.fn, *args, passes=AS_TRACED)


@pytest.mark.parametrize("seed", range(4))
def test_random_program_scheduled(seed):
    check_random_program(random_program(seed), mode="checked", passes=("jx-schedule",))


@pytest.mark.parametrize("name", ["scan_rnn", "nested_scan_while_switch", "grad_through_scan"])
def test_the_bound_needs_no_addresses(name):
    """`module_bound` plans buffers and lifetimes without placing them: the max-live of the rows is
    the same as that of a plan with addresses."""
    program = next(p for p in CORPUS if p.name == name)
    module = jaxalloc.planned(program.fn).lower(*program.make_args())
    assert module_bound(module) == module_bound(module, allocator="greedy-size") > 0


def test_a_large_module_gets_fewer_trials(monkeypatch):
    """The block-by-block search plans at most `SEARCH_OPS` ops in all: a module of that many ops
    gets one trial, of more none; the orders of every block applied whole are planned still."""
    program = next(p for p in CORPUS if p.name == "grad_through_scan")
    module = jaxalloc.planned(program.fn, passes=AS_TRACED).lower(*program.make_args())
    ops = sum(1 for _ in module.walk())
    plans = []
    bound = scheduling.module_bound
    monkeypatch.setattr(scheduling, "module_bound", lambda *a, **k: plans.append(1) or bound(*a, **k))
    found = {}
    for search in (10**9, ops, ops - 1):
        monkeypatch.setattr(scheduling, "SEARCH_OPS", search)
        plans.clear()
        found[search] = schedule(module.clone())["best"], len(plans)
    whole = len(ORDERS)
    assert found[10**9][1] > whole + 1 and found[ops][1] == whole + 1 and found[ops - 1][1] == whole
    assert found[10**9][0] == found[ops][0] == found[ops - 1][0]
