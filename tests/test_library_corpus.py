"""The library corpus through the differential check: compiled, checked and (a quarter) eager.

Each program of `library_programs` (flax.nnx, flax.linen, dm-haiku, equinox, diffrax and optax
written as their users write them) is converted, printed, parsed back and run inside its planned
arena as one compiled kernel (the default mode, where XLA must never copy the arena) and by the
interpreter under the plan sanitizer ("checked", one program in four, where the two slowest hand
it to a lighter program of their library: the diffrax gradient to the forward solve, the nnx CNN's
training step to its evaluation), and compared with `jax.jit`; one in four also runs
eagerly. The three programs whose kernels XLA compiles slowest (`HEAVY`, 25-46 s a test on two
cores) run with `JAXALLOC_THOROUGH=1` and in `benchmarks/speed.py`; their lighter siblings run here (the suite stays under ten minutes; `JAXALLOC_THOROUGH=1` runs every program in every
mode). One test runs a program in its modes, traced and run by `jax.jit` once (`check_modes`).
Arena runs must not copy anything between loop rounds or branches.
"""

from __future__ import annotations

import pytest

from differential import THOROUGH, assert_deterministic_args, check_modes, sample
from library_programs import BY_NAME, LIBRARY, PROGRAMS

LIGHTER = {"diffrax_neural_ode_grad": "diffrax_neural_ode", "nnx_cnn_train_step": "nnx_cnn_eval"}
"""Sanitized programs whose op-by-op run takes 15-30 s, and the program sanitized in their place."""
SANITIZED = {program.name if THOROUGH else LIGHTER.get(program.name, program.name) for program in sample(PROGRAMS, 4)}
EAGER = {program.name for program in sample(PROGRAMS, 4, first=1)}
HEAVY = {"diffrax_neural_ode_grad": "diffrax_neural_ode", "nnx_cnn_train_step": "nnx_cnn_eval",
         "linen_cnn_train_step": "linen_cnn_eval"}
"""Programs whose compiled kernels take XLA 15-30 s to compile, and the program of their library that runs in the suite."""


def _sampled(program):
    if THOROUGH or program.name not in HEAVY:
        return program
    reason = f"JAXALLOC_THOROUGH=1 runs it; {HEAVY[program.name]} runs in its place"
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
