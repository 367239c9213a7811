"""`Plan.compare_xla()` and `jaxalloc compare`: XLA's memory_analysis() beside the plan, numbers unchanged; the
fair pair is the arena with the outputs inside against XLA's temp + output - alias, and beside it what a
compiled call holds, by its parts."""

from __future__ import annotations

from pathlib import Path

import jax
import jax.numpy as jnp
import pytest

import jaxalloc
from jaxalloc.cli import main
from jaxalloc.errors import JaxallocError
from jaxalloc.planning.plan import make_plan
from jaxalloc.xla.memory import FUSION_OFF, XlaComparison

FIELDS = ("argument_size_in_bytes", "output_size_in_bytes", "alias_size_in_bytes", "temp_size_in_bytes", "peak_memory_in_bytes")


def layer(x, w1, w2):
    h = jax.nn.gelu(x @ w1)
    return jnp.tanh(h @ w2), h.sum()


ARGS = (jnp.ones((32, 64)), jnp.ones((64, 128)) / 64, jnp.ones((128, 64)) / 128)


@pytest.fixture(scope="module")
def comparison() -> tuple[jaxalloc.Plan, XlaComparison]:
    plan = jaxalloc.planned(layer).plan(*ARGS)
    return plan, plan.compare_xla()


def test_numbers_equal_memory_analysis(comparison):
    _, result = comparison
    lowered = jax.jit(layer).lower(*ARGS)
    expected = [lowered.compile().memory_analysis()]
    if jax.default_backend() == "cpu":
        expected.append(lowered.compile(compiler_options=dict(FUSION_OFF)).memory_analysis())
    assert [m.flags for m in result.xla] == ["default flags", "matmul fusion off"][: len(expected)]
    for ours, theirs in zip(result.xla, expected, strict=True):
        for name in FIELDS:
            assert getattr(ours, name) == getattr(theirs, name), name


def test_fair_pair_is_arena_with_outputs_inside_against_temp_plus_output_minus_alias(comparison):
    _, result = comparison
    inside = jaxalloc.planned(layer).plan(*ARGS, include_outputs=True)
    assert result.arena_bytes == inside.arena_bytes and result.lower_bound == inside.lower_bound
    assert result.total_bytes == inside.total_bytes
    lowered = jax.jit(layer).lower(*ARGS)
    expected = [lowered.compile().memory_analysis()]
    if jax.default_backend() == "cpu":
        expected.append(lowered.compile(compiler_options=dict(FUSION_OFF)).memory_analysis())
    for ours, theirs in zip(result.xla, expected, strict=True):
        xla = theirs.temp_size_in_bytes + theirs.output_size_in_bytes - theirs.alias_size_in_bytes
        assert result.xla_bytes(ours) == xla
        assert result.ratio(ours) == pytest.approx(inside.arena_bytes / xla)


def test_the_arena_with_the_outputs_outside_is_set_against_temp_alone(comparison):
    plan, result = comparison
    outside = make_plan(plan.source, plan.allocator, plan.alignment)
    assert result.outside_arena_bytes == outside.arena_bytes and result.outside_lower_bound == outside.lower_bound
    assert result.allocator == "nnc" and result.function == "layer"
    off = result.baseline()
    assert result.temp_ratio(off) == pytest.approx(outside.arena_bytes / off.temp_size_in_bytes)


def test_table_fits_100_columns_and_says_which_figure_to_read(comparison):
    _, result = comparison
    lines = str(result).splitlines()
    assert max(map(len, lines)) <= 100
    calls = len(result.calls)
    assert "XLA, default flags" in lines[2] and "jaxalloc arena" in lines[-5 - calls] and "jaxalloc lower bound" in lines[-4 - calls]
    for heading in ("output", "alias", "temp", "temp + output - alias", "arena / XLA", "call / XLA"):
        assert heading in lines[1]
    baseline = result.baseline()
    for line, memory, call in zip(lines[-2 - calls:-2], result.xla, result.calls, strict=True):
        assert line == f"call, {memory.flags}: {call.describe()}"
    assert lines[-2] == f"Read: arena vs XLA temp + output - alias ({baseline.flags}): {result.ratio(baseline):.2f}"
    assert lines[-1] == f"What a call holds vs the same: {result.call_ratio(baseline):.2f}"
    if jax.default_backend() == "cpu":
        assert "XLA, matmul fusion off" in lines[3] and baseline.flags == "matmul fusion off"


def test_a_compiled_call_is_set_beside_xla_by_its_parts(comparison):
    """What a call holds, from `memory_analysis()` of its own kernel compiled with each of XLA's flags:
    with default flags, the arena, kernel temp and outputs a call measured with `measure_memory=True`
    reports. Measuring builds a kernel of its own: a later first call still traces and times its own."""
    plan, result = comparison
    assert len(result.calls) == len(result.xla)
    measured = jaxalloc.planned(layer, measure_memory=True)
    measured(*ARGS)
    run, call = measured.last_run, result.calls[0]
    assert (call.arena, call.kernel_temp, call.outputs, call.total) == (
        run.arena_bytes, run.kernel_temp_bytes, run.output_bytes, run.call_bytes)
    for memory, call in zip(result.xla, result.calls):
        assert result.call_ratio(memory) == pytest.approx(call.total / result.xla_bytes(memory))
    assert plan.measure_call(None) == result.calls[0]
    fresh = jaxalloc.planned(layer)
    fresh.plan(*ARGS).measure_call(dict(FUSION_OFF))
    fresh(*ARGS)
    assert "kernel trace" in fresh.last_run.phases


def test_a_donated_argument_that_an_output_takes_is_no_new_memory_of_the_call():
    """As XLA's figure, a call's counts the donated bytes once: the output XLA computes in them is not
    new memory beside them."""

    def step(w, x):
        return w - 0.1 * jnp.tanh(x.T @ (x @ w)), jnp.sum(x)

    w, x = jnp.ones((64, 64)), jnp.ones((16, 64))
    donating = jaxalloc.planned(step, donate_argnums=0, measure_memory=True)
    result = donating.plan(w, x).compare_xla()
    call = result.calls[-1]
    assert call.aliased == w.nbytes == result.donated
    assert call.total == call.arena + call.kernel_temp + call.outputs - w.nbytes
    assert result.call_ratio(result.baseline()) == pytest.approx((call.total + w.nbytes) / result.xla_bytes(result.baseline()))
    donating(w, x)
    run = donating.last_run
    assert run.aliased_bytes == w.nbytes and run.call_bytes == result.calls[0].total


def test_a_plan_of_a_mode_without_a_kernel_sets_no_call_beside_xla():
    result = jaxalloc.planned(layer, mode="eager").plan(*ARGS).compare_xla()
    assert result.calls == () and result.call_ratio(result.xla[0]) is None and "call / XLA" not in str(result)


def test_plan_with_outputs_inside_compares_the_same(comparison):
    _, result = comparison
    assert jaxalloc.planned(layer).plan(*ARGS, include_outputs=True).compare_xla() == result


def test_plan_after_other_passes_is_made_again_after_the_same_passes():
    fused = jaxalloc.planned(layer, passes=("jx-dce", "jx-canonicalize", "jx-fuse"))
    result = fused.plan(*ARGS, alignment=128).compare_xla()
    inside = fused.plan(*ARGS, alignment=128, include_outputs=True)
    assert result.arena_bytes == inside.arena_bytes and result.lower_bound == inside.lower_bound


def test_plan_of_a_bare_module_cannot_compare():
    module = jaxalloc.planned(layer).lower(*ARGS)
    with pytest.raises(JaxallocError, match="planned\\(f\\).plan"):
        make_plan(module).compare_xla()


MODEL = """
import jax
import jax.numpy as jnp

def layer(x, w1, w2):
    h = jax.nn.gelu(x @ w1)
    return jnp.tanh(h @ w2), h.sum()
"""


@pytest.fixture
def model_file(tmp_path: Path) -> str:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return str(path)


def test_compare_command(capsys, model_file):
    code = main(["compare", f"{model_file}:layer", "f32[32,64]", "f32[64,128]", "f32[128,64]"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "layer on " in out and "XLA's memory_analysis() beside jaxalloc's arena (nnc)" in out
    assert "XLA heap simulator (temp_size_in_bytes)" in out and "max-live bound" in out


def test_compare_command_no_replan_and_errors(capsys, model_file):
    code = main(["compare", f"{model_file}:layer", "f32[32,64]", "f32[64,128]", "f32[128,64]", "--no-replan"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "jaxalloc's arena (nnc)" in out and "XLA heap simulator" not in out
    assert "Read: arena vs XLA temp + output - alias" in out
    code = main(["compare", f"{model_file}:layer", "f32[32,64]", "f32[64,128]", "f32[128,64]", "--allocator", "nope"])
    out, err = capsys.readouterr()
    assert code == 2 and "unknown allocator 'nope'" in err
