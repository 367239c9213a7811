"""Random JAX programs (jaxalloc/testing/random_programs.py) through the whole differential check.

`JAXALLOC_RANDOM_PROGRAMS=N` runs N programs instead of the default. A failure names its
seed and prints the program; `random_programs.random_program(seed)` rebuilds it.

Programs run checked (the sanitizer). Besides the outputs, the run must copy nothing
(`last_run.copied_bytes == 0`, checked after its values and reads: `CopiedBytes` names the bytes
otherwise), and a program
with `jax.debug.callback`s must hand its callbacks the same values as `jax.jit` does, the ordered
ones in the same order (`check_random_program`; `benchmarks/soak.py` runs the same check over many
more seeds).
"""

from __future__ import annotations

import dataclasses
import functools
import os
import re
from collections import Counter

import jax
import numpy as np
import pytest

import jaxalloc
from jaxalloc.api import DEFAULT_PASSES
from jaxalloc.testing.differential import check_random_program
from jaxalloc.testing.random_programs import random_program

DEFAULT_PROGRAMS = 40
"""Programs checked by default (the suite's time budget); the generator's coverage is counted over
`COVERAGE_PROGRAMS`, which only builds them."""
COVERAGE_PROGRAMS = 220
PROGRAMS = int(os.environ.get("JAXALLOC_RANDOM_PROGRAMS", DEFAULT_PROGRAMS))

_checked_ir: dict[int, str] = {}
"""IR text of each program the differential test has checked, reused by the coverage test."""


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_random_program(seed):
    program = random_program(seed)
    try:
        planned = check_random_program(program)
    except Exception as e:
        raise AssertionError(f"random program of seed {seed} failed:\n{program.describe()}") from e
    _checked_ir[seed] = str(planned.lower(*program.args))


ONCE_MISHANDLED = (105, 607, 788, 2828)
"""Seeds the default passes and the planner once mishandled: runs that copied bytes where an inner
loop's ring lies in a toggle ring's next view, its first round reading the carried value in place
(105, 607, whose static check also grew round after round), or where a chain of cases may hand the
carried value back, its first round's an argument (788); a toggle ring of one slot put in an
enclosing loop's next view, which `#mem.views` cannot say (2828)."""


@pytest.mark.parametrize("mode", ["checked", "compiled"])
@pytest.mark.parametrize("seed", ONCE_MISHANDLED)
def test_random_programs_once_mishandled_run_without_copies(seed, mode):
    check_random_program(random_program(seed), mode=mode, passes=DEFAULT_PASSES)


ONCE_COPYING_ON_A_PATH = (36337, 39496, 49632)
"""Seeds whose plans listed copies on paths their own arguments do not take: a loop in a branch
whose result, yielded as the case result, may be an init operand a chain of cases may hand on
(36337), or a value of the branch a toggle ring is handed back (49632); a chain of cases in a case
whose result lies in an enclosing case result's memory (39496)."""


@pytest.mark.parametrize("seed", ONCE_COPYING_ON_A_PATH)
def test_random_programs_once_copying_on_a_path_plan_no_copy(seed):
    fn, args = random_program(seed)
    assert jaxalloc.planned(fn).plan(*args, include_outputs=True).check().copies == ()


@pytest.mark.parametrize("mode", ["checked", "compiled"])
def test_random_program_36337_runs_the_path_that_copied_without_copies(mode):
    """With no flag set, 36337's branch runs its loop, whose result was copied into the case result."""
    program = random_program(36337)
    x, flags = program.args
    check_random_program(dataclasses.replace(program, args=(x, np.zeros_like(flags))), mode=mode, passes=DEFAULT_PASSES)


@functools.cache
def _ir(seed: int) -> str:
    if seed in _checked_ir:
        return _checked_ir[seed]
    fn, args = random_program(seed)
    return str(jaxalloc.planned(fn, passes=()).lower(*args))  # as `check_random_program` plans it


_REDUCTIONS = re.compile(r'"(reduce_(sum|max|min|and|or)|argmax|argmin)"')
_IR_CONSTRUCTS = {
    "jx.while": lambda ir: "jx.while" in ir,
    "jx.case": lambda ir: "jx.case" in ir,
    "dot_general": lambda ir: '"dot_general"' in ir,
    "reduction": lambda ir: _REDUCTIONS.search(ir) is not None,
    "transpose": lambda ir: '"transpose"' in ir,
    "transpose or reshape": lambda ir: '"transpose"' in ir or '"reshape"' in ir,
    "nested jx.while/jx.case": lambda ir: re.search(r"^ {6,}(%.* = )?jx\.(while|case)", ir, re.MULTILINE) is not None,
}
_IR_MINIMUM = {"nested jx.while/jx.case": 15}
"""Fewer than the 20 of the rest: JAX versions differ in what they trace nested (18 with JAX 0.11.2, more with 0.10.2)."""
_FEATURES = {  # generator features, with the least number of programs (of 220) expected to have them
    "scan": 30, "scan reverse": 10, "scan length 0": 5, "fori": 15, "while": 25, "while data-dependent": 10,
    "cond": 25, "switch": 15, "vmap": 10, "grad": 10, "depth2": 40, "depth3": 5,
    "int": 100, "bool": 60, "several outputs": 100,
    # program shapes that found planner bugs
    "cond passthrough chain": 12, "case result as loop init": 7, "carry swap": 5, "carry rotation": 6,
    "carry permutation + computed": 6, "yield closed-over value": 6, "yield same value twice": 5,
    "yield constant": 8, "init read in body": 6, "scan init is xs": 5, "zero-trip fori": 6, "zero-trip while": 5,
    "operand read after": 40, "clamped index in loop": 6, "depth4": 6, "effect": 10, "ordered effect": 5,
}


def test_generator_covers_the_constructs():
    seeds = range(COVERAGE_PROGRAMS)
    ir_counts = Counter(name for seed in seeds for name, found in _IR_CONSTRUCTS.items() if found(_ir(seed)))
    features = Counter(f for seed in seeds for f in random_program(seed).features)
    counts = {**{name: ir_counts[name] for name in _IR_CONSTRUCTS}, **{f: features[f] for f in _FEATURES}}
    print(f"programs (of {len(seeds)}) with each construct: {counts}")
    for name in _IR_CONSTRUCTS:
        assert counts[name] >= _IR_MINIMUM.get(name, 20), f"only {counts[name]} programs with {name}: {counts}"
    for name, minimum in _FEATURES.items():
        assert counts[name] >= minimum, f"only {counts[name]} programs with {name}: {counts}"


def test_random_programs_run_their_loops_in_the_arena():
    """Every value of a random program is small, which the kernel's own plan leaves to XLA: the
    check runs them with their small values placed (`SMALL_VALUES_PLACED`), or it would run no
    ring, toggle or view of the arena. Most programs with a loop run with an arena."""
    looping = [seed for seed in range(24) if "jx.while" in _ir(seed)]
    in_arena = [seed for seed in looping if check_random_program(random_program(seed)).last_run.arena_bytes]
    assert len(looping) >= 12 and len(in_arena) >= len(looping) // 2, (looping, in_arena)


@pytest.mark.parametrize("seed", [0, 7, 101])
def test_same_seed_same_program(seed):
    first, second = random_program(seed), random_program(seed)
    assert first.describe() == second.describe()
    assert [np.asarray(a).tolist() for a in jax.tree.leaves(first.args)] == [
        np.asarray(a).tolist() for a in jax.tree.leaves(second.args)
    ]
    assert str(jaxalloc.planned(first.fn).lower(*first.args)) == str(jaxalloc.planned(second.fn).lower(*second.args))
    assert random_program(seed + 1).describe() != first.describe()
