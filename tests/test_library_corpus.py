"""The library corpus through the differential check, in every mode.

Each program of `library_programs` (flax.nnx, flax.linen, dm-haiku, equinox, diffrax and optax
written as their users write them) is converted, printed, parsed back and run by the
interpreter eagerly, inside its planned arena and under the plan sanitizer ("checked"), and
compared with `jax.jit`. Arena runs must not copy anything between loop rounds or branches.
"""

from __future__ import annotations

import pytest

from differential import assert_deterministic_args, check_program
from library_programs import BY_NAME, LIBRARY, PROGRAMS

MODES = ("eager", "arena", "checked")

COPIES_LEFT = {
    "diffrax_euler_saveat_ts": "an inner loop's ring of two slots is yielded as an outer loop's carry; the plan copies it into the outer ring",
}
"""Programs whose arena runs still copy bytes the plan should not need, and why (checked, not skipped:
their values must still equal jax.jit's, and a program that stops copying must leave this list)."""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("program", PROGRAMS, ids=lambda p: p.name)
def test_library_program(program, mode):
    planned = check_program(program.fn, *program.make_args(), mode=mode)
    if mode == "eager":
        return
    copied = planned.last_run.copied_bytes
    if program.name in COPIES_LEFT:
        assert copied > 0, f"{program.name} copies nothing now: remove it from COPIES_LEFT"
        pytest.xfail(f"copies {copied} B: {COPIES_LEFT[program.name]}")
    assert copied == 0


def test_library_table():
    assert len(PROGRAMS) >= 22
    assert len(BY_NAME) == len(PROGRAMS) and set(LIBRARY) == set(BY_NAME)
    assert set(LIBRARY.values()) == {"flax.nnx", "flax.linen", "dm-haiku", "equinox", "diffrax", "optax"}
    for program in PROGRAMS:
        assert program.fn.__doc__, program.name
        assert_deterministic_args(program.make_args)
