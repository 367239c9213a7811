"""The library corpus through the differential check: compiled, checked and (a quarter) eager.

Each program of `jaxalloc.testing.library` (flax.nnx, flax.linen, dm-haiku, equinox, diffrax and optax
written as their users write them) is converted, printed, parsed back and run inside its planned
arena as one compiled kernel (the default mode, where XLA must never copy the arena), by the
interpreter under the plan sanitizer ("checked", one program in four) and eagerly (one in four),
and compared with `jax.jit`. The three slowest programs (`LIGHTER`: XLA compiles their kernels in
15-30 s, and their op-by-op runs take as long) hand their modes to a lighter program of their
library, for the suite's ten minutes, and `JAXALLOC_THOROUGH=1` runs every program in every
mode. One test runs a program in its modes, traced and run by `jax.jit` once (`check_modes`).
Arena runs must not copy anything between loop rounds or branches.
"""

from __future__ import annotations

import pytest

from jaxalloc.testing.differential import THOROUGH, assert_deterministic_args, check_modes, sample
from jaxalloc.testing.library import BY_NAME, LIBRARY, PROGRAMS

LIGHTER = {"diffrax_neural_ode_grad": "diffrax_neural_ode", "nnx_cnn_train_step": "nnx_cnn_eval",
           "linen_cnn_train_step": "linen_cnn_eval"}
"""The slowest programs, each with the program of its library that runs in its place (in each of its modes)."""


def _run_as(programs) -> set[str]:
    """The names of the programs that run for `programs` (a lighter one in place of each of `LIGHTER`)."""
    return {program.name if THOROUGH else LIGHTER.get(program.name, program.name) for program in programs}


SANITIZED = _run_as(sample(PROGRAMS, 4))
EAGER = _run_as(sample(PROGRAMS, 4, first=1))


def _sampled(program):
    if THOROUGH or program.name not in LIGHTER:
        return program
    reason = f"JAXALLOC_THOROUGH=1 runs it; {LIGHTER[program.name]} runs in its place"
    return pytest.param(program, marks=pytest.mark.skip(reason=reason))


@pytest.mark.parametrize("program", [_sampled(p) for p in PROGRAMS], ids=lambda p: p.name)
def test_library_program(program):
    modes = ("compiled",) + ("checked",) * (program.name in SANITIZED) + ("eager",) * (program.name in EAGER)
    checked = check_modes(program.fn, *program.make_args(), modes=modes)
    for mode, planned in checked.items():
        assert planned.last_run.copied_bytes == 0, mode


def test_library_table():
    assert len(PROGRAMS) >= 22
    assert len(BY_NAME) == len(PROGRAMS) and set(LIBRARY) == set(BY_NAME)
    assert set(LIBRARY.values()) == {"flax.nnx", "flax.linen", "dm-haiku", "equinox", "diffrax", "optax"}
    for program in PROGRAMS:
        assert program.fn.__doc__, program.name
        assert_deterministic_args(program.make_args)
