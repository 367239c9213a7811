"""The xDSL passes: the plan written on the IR, re-checked from the attributes alone."""

import subprocess
import sys
from pathlib import Path

import jax.numpy as jnp
import pytest
from xdsl.context import Context
from xdsl.utils.exceptions import DiagnosticException

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import ArenaAttr
from jaxalloc.passes.assign import AssignBuffersPass, VerifyPlanPass
from jaxalloc.testing.corpus import PROGRAMS


def planned_module(fn, *args, **options):
    module = jaxalloc.planned(fn).lower(*args).clone()
    AssignBuffersPass(**options).apply(Context(), module)
    return module


@pytest.mark.parametrize("allocator", ["nnc", "greedy-size"])
def test_every_corpus_plan_verifies_from_its_attributes(allocator):
    for program in PROGRAMS:
        module = planned_module(program.fn, *program.make_args(), allocator=allocator)
        VerifyPlanPass().apply(Context(), module)


def test_the_arena_attribute_matches_the_plan():
    def mlp(x, w1, w2):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2).sum()

    args = (jnp.ones((64, 128)), jnp.ones((128, 256)), jnp.ones((256, 32)))
    module = planned_module(mlp, *args, include_outputs=True)
    func = next(iter(module.ops))
    assert func.attributes["mem.arena"] == ArenaAttr(jaxalloc.planned(mlp).plan(*args, include_outputs=True).arena_bytes, True)


def test_a_corrupted_plan_is_caught_and_the_two_values_are_named():
    def fn(x, y):
        a = jnp.sin(x)
        b = jnp.cos(y)
        return (a @ b).sum()

    module = planned_module(fn, jnp.ones((32, 32)), jnp.ones((32, 32)))
    prims = {op.primitive.data: op for op in module.walk() if isinstance(op, jx.PrimOp)}
    prims["cos"].attributes["mem.slot"] = prims["sin"].attributes["mem.slot"]
    with pytest.raises(DiagnosticException, match=r"invalid plan of @fn: %c \(sin .*\) is read by .*, but %d \(cos .*\) was written over"):
        VerifyPlanPass().apply(Context(), module)


def test_unknown_allocator_is_a_diagnostic():
    with pytest.raises(DiagnosticException, match="unknown allocator 'fastest'"):
        planned_module(lambda x: x * 2, jnp.ones(3), allocator="fastest")


def test_xdsl_opt_runs_the_pipeline(tmp_path: Path):
    text = str(jaxalloc.planned(lambda x, w: jnp.tanh(x @ w) @ w).lower(jnp.ones((8, 8)), jnp.ones((8, 8))))
    xdsl_opt = Path(sys.executable).parent / "xdsl-opt"
    run = subprocess.run(
        [str(xdsl_opt), "-p", "jx-assign-buffers{allocator=best alignment=128},jx-verify-plan"],
        input=text, capture_output=True, text=True,
    )
    assert run.returncode == 0, run.stderr
    assert "mem.arena = #mem.arena<bytes = " in run.stdout
    assert "mem.slot = #mem.slot<offset = 0, size = 256>" in run.stdout


def test_xdsl_opt_runs_the_passes_without_importing_jax():
    """Importing JAX takes seconds, which every `xdsl-opt` call would pay; only `jx-canonicalize`
    (and a pass meeting a PRNG key type) needs it."""
    script = (
        "import sys\n"
        "from jaxalloc.universe import JAXALLOC_UNIVERSE as u\n"
        "for name, load in {**u.all_dialects, **u.all_passes}.items():\n"
        "    if name != 'jx-canonicalize':\n"
        "        load()\n"
        "assert 'jax' not in sys.modules, 'JAX was imported'\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
