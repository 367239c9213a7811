"""The library corpus through the differential check: compiled, checked and (a third) eager.

Each program of `library_programs` (flax.nnx, flax.linen, dm-haiku, equinox, diffrax and optax
written as their users write them) is converted, printed, parsed back and run inside its planned
arena as one compiled kernel (the default mode, where XLA must never copy the arena) and by the
interpreter under the plan sanitizer ("checked"), and compared with `jax.jit`; every third
program also runs eagerly (the suite stays under ten minutes). One test runs a program in every
mode, traced and run by `jax.jit` once (`check_modes`). Arena runs must not copy anything between
loop rounds or branches.
"""

from __future__ import annotations

import pytest

from differential import assert_deterministic_args, check_modes
from library_programs import BY_NAME, LIBRARY, PROGRAMS

MODES = ("compiled", "checked")
EAGER = {program.name for program in PROGRAMS[::3]}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_library_program(program):
    modes = MODES + ("eager",) * (program.name in EAGER)
    checked = check_modes(program.fn, *program.make_args(), modes=modes)
    for mode in MODES:
        assert checked[mode].last_run.copied_bytes == 0, mode


def test_library_table():
    assert len(PROGRAMS) >= 22
    assert len(BY_NAME) == len(PROGRAMS) and set(LIBRARY) == set(BY_NAME)
    assert set(LIBRARY.values()) == {"flax.nnx", "flax.linen", "dm-haiku", "equinox", "diffrax", "optax"}
    for program in PROGRAMS:
        assert program.fn.__doc__, program.name
        assert_deterministic_args(program.make_args)
