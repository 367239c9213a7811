"""Mutation test of the two plan checkers: corrupt valid plans at random, count who notices.

Each corruption (`jaxalloc/testing/mutations.py`: move a slot onto another value's, swap two slots, shorten a
ring, drop a keep-alive) is applied to two plans of a corpus or random program: the plan a call
runs, and the plan of every value in the arena (a random program's values are all small, and the
first leaves them to XLA). The corrupted module runs through the static plan checker, in the arena
(is the result changed?) and checked (does the sanitizer raise?). Prints one row per kind of
corruption.

    python benchmarks/mutations.py [--seeds 100] [--per-program 3]
"""

from __future__ import annotations

import argparse
import itertools
import random
import time
from collections import Counter

import jax

import jaxalloc
from jaxalloc.reports.text import text_table
from jaxalloc.testing.corpus import PROGRAMS
from jaxalloc.testing.mutations import KINDS, run_plan, try_mutation
from jaxalloc.testing.random_programs import random_program


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=100, help="random programs (after the corpus)")
    parser.add_argument("--per-program", type=int, default=3, help="corruptions of each kind per program")
    options = parser.parse_args()
    rng = random.Random(0)
    counts = {kind: Counter() for kind in KINDS}
    misses = []
    start = time.perf_counter()
    programs = [(p.name, p.fn, p.make_args()) for p in PROGRAMS]
    programs += [(f"seed {s}", *random_program(s)) for s in range(options.seeds)]
    for (name, fn, args), inside in itertools.product(programs, (False, True)):
        planned = jaxalloc.planned(fn)
        table = planned._traced(args, {}).converted.table
        plan = planned.plan(*args, include_outputs=inside)
        flat = jax.tree_util.tree_leaves(args)
        valid = run_plan(plan.module, table, flat)
        for kind in KINDS:
            for _ in range(options.per_program):
                outcome = try_mutation(plan, table, flat, valid, kind, rng)
                if outcome is None:
                    continue
                c = counts[kind]
                c["tried"] += 1
                c["changed"] += outcome.changed
                c["static"] += outcome.static
                c["sanitizer"] += outcome.sanitizer
                c["changed, static"] += outcome.changed and outcome.static
                c["changed, sanitizer"] += outcome.changed and outcome.sanitizer
                if outcome.changed and not (outcome.static and outcome.sanitizer):
                    misses.append(f"{name}: {outcome.kind} {outcome.what} (static {outcome.static}, sanitizer {outcome.sanitizer})")
    columns = ("tried", "changed", "static", "sanitizer", "changed, static", "changed, sanitizer")
    rows = [(kind, *(f"{counts[kind][c]:,}" for c in columns)) for kind in KINDS]
    rows.append(("all", *(f"{sum(counts[k][c] for k in KINDS):,}" for c in columns)))
    print(f"{len(programs)} programs, {time.perf_counter() - start:.0f} s")
    print("\n".join(text_table(("corruption", "tried", "changed a result", "caught statically", "caught by the sanitizer",
                                "changed and caught statically", "changed and caught by the sanitizer"), rows)))
    for miss in misses:
        print("missed:", miss)


if __name__ == "__main__":
    main()
