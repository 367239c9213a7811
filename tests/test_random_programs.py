"""Random JAX programs (tests/random_programs.py) through the whole differential check.

`JAXALLOC_RANDOM_PROGRAMS=N` runs N programs instead of the default. A failure names its
seed and prints the program; `random_programs.random_program(seed)` rebuilds it.
"""

from __future__ import annotations

import functools
import os
import re
from collections import Counter

import jax
import numpy as np
import pytest
from differential import check_program
from random_programs import random_program

import jaxalloc

DEFAULT_PROGRAMS = 220
PROGRAMS = max(DEFAULT_PROGRAMS, int(os.environ.get("JAXALLOC_RANDOM_PROGRAMS", DEFAULT_PROGRAMS)))

_checked_ir: dict[int, str] = {}
"""IR text of each program the differential test has checked, reused by the coverage test."""


@pytest.mark.parametrize("seed", range(PROGRAMS))
def test_random_program(seed):
    program = random_program(seed)
    fn, args = program
    try:
        planned = check_program(fn, *args)
    except Exception as e:
        raise AssertionError(f"random program of seed {seed} failed:\n{program.describe()}") from e
    _checked_ir[seed] = str(planned.lower(*args))


@functools.cache
def _ir(seed: int) -> str:
    if seed in _checked_ir:
        return _checked_ir[seed]
    fn, args = random_program(seed)
    return str(jaxalloc.planned(fn).lower(*args))


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
_FEATURES = {  # generator features, with the least number of programs (of 220) expected to have them
    "scan": 30, "scan reverse": 10, "scan length 0": 5, "fori": 15, "while": 25, "while data-dependent": 10,
    "cond": 25, "switch": 15, "vmap": 10, "grad": 10, "depth2": 40, "depth3": 5,
    "int": 100, "bool": 60, "several outputs": 100,
}


def test_generator_covers_the_constructs():
    seeds = range(DEFAULT_PROGRAMS)
    ir_counts = Counter(name for seed in seeds for name, found in _IR_CONSTRUCTS.items() if found(_ir(seed)))
    features = Counter(f for seed in seeds for f in random_program(seed).features)
    counts = {**{name: ir_counts[name] for name in _IR_CONSTRUCTS}, **{f: features[f] for f in _FEATURES}}
    print(f"programs (of {len(seeds)}) with each construct: {counts}")
    for name in _IR_CONSTRUCTS:
        assert counts[name] >= 20, f"only {counts[name]} programs with {name}: {counts}"
    for name, minimum in _FEATURES.items():
        assert counts[name] >= minimum, f"only {counts[name]} programs with {name}: {counts}"


@pytest.mark.parametrize("seed", [0, 7, 101])
def test_same_seed_same_program(seed):
    first, second = random_program(seed), random_program(seed)
    assert first.describe() == second.describe()
    assert [np.asarray(a).tolist() for a in jax.tree.leaves(first.args)] == [
        np.asarray(a).tolist() for a in jax.tree.leaves(second.args)
    ]
    assert str(jaxalloc.planned(first.fn).lower(*first.args)) == str(jaxalloc.planned(second.fn).lower(*second.args))
    assert random_program(seed + 1).describe() != first.describe()
