"""Corrupted plans (jaxalloc/testing/mutations.py) on corpus and random programs: every corruption that changes a
result is caught by the static plan checker and by the sanitizer."""

from __future__ import annotations

import itertools
import random

import jax
import pytest
from test_trust import REGRESSIONS

import jaxalloc
from jaxalloc.api import DEFAULT_PASSES
from jaxalloc.testing.corpus import PROGRAMS
from jaxalloc.testing.differential import AS_TRACED, THOROUGH
from jaxalloc.testing.mutations import KINDS, run_plan, try_mutation
from jaxalloc.testing.random_programs import random_program

CORPUS = [(p.name, p.fn, p.make_args) for p in PROGRAMS if p.name in {
    "mlp_train_step", "scan_rnn", "newton_sqrt", "switch", "nested_while_cond_scan", "nested_scan_while_switch",
    "grad_through_cond", "fori_loop_dynamic", "elementwise_chain",
}]


def _programs(kind: str):
    yield from ((name, fn, make_args()) for name, fn, make_args in CORPUS)
    for seed in range(24 if THOROUGH else 16):
        fn, args = random_program(seed)
        yield f"seed{seed}", fn, args
    if kind == "drop keep-alive":  # programs that once ran wrong: each keeps a value alive for a view
        yield from ((f"{fn.__name__}{i}", fn, args) for i, (fn, args) in enumerate(REGRESSIONS))


@pytest.mark.parametrize("kind", KINDS)
def test_every_corruption_that_changes_a_result_is_caught_by_both_checkers(kind):
    rng = random.Random(KINDS.index(kind))
    tried = changed = static = sanitizer = 0
    # keep-alives are rarer after fusion: that kind also corrupts plans of the programs' own ops
    pipelines = (DEFAULT_PASSES, AS_TRACED) if kind == "drop keep-alive" else (DEFAULT_PASSES,)
    # the kernel's plan, and the plan of every value in the arena: the outputs, products and scalars too
    for (name, fn, args), passes, inside in itertools.product(_programs(kind), pipelines, (False, True)):
        planned = jaxalloc.planned(fn, passes=passes)
        traced = planned._traced(args, {})
        plan = planned.plan(*args, include_outputs=inside)
        flat = jax.tree_util.tree_leaves(args)
        valid = run_plan(plan.module, traced.converted.table, flat)
        for _ in range(4 if kind == "drop keep-alive" else 2):
            outcome = try_mutation(plan, traced.converted.table, flat, valid, kind, rng)
            if outcome is None:
                continue
            tried += 1
            static += outcome.static
            sanitizer += outcome.sanitizer
            if outcome.changed:
                changed += 1
                assert outcome.static, f"{name}: {outcome.what} changed the result; the static checker missed it"
                assert outcome.sanitizer, f"{name}: {outcome.what} changed the result; the sanitizer missed it"
    print(f"{kind}: {tried} corruptions, {changed} changed a result, static checker caught {static}, sanitizer {sanitizer}")
    assert tried >= 10
