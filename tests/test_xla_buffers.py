"""Re-planning XLA's own buffers: parsing real dumps written during the run, the rebuilt problem, errors."""

from __future__ import annotations

import glob
import os
import tempfile
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxalloc.allocators import ALLOCATORS, Problem
from jaxalloc.allocators.bound import max_live
from jaxalloc.checks.checker import check_plan
from jaxalloc.xla.buffers import _named_afresh, dump_xla_buffers, replan_problem, replan_xla_buffers, temp_problem
from jaxalloc.xla.dump import XlaDumpError, parse_buffer_assignment, parse_live_ranges
from jaxalloc.xla.memory import FUSION_OFF


def scanned(x, ws):
    """A loop (carried buffers, phis), matmuls, in-place elementwise ops and a reduction."""

    def body(c, w):
        h = jnp.tanh(c @ w)
        return h + c, h.sum()

    c, ys = jax.lax.scan(body, x, ws)
    return jnp.exp(c).mean() + ys.sum()


ARGS = (jax.ShapeDtypeStruct((32, 64), jnp.float32), jax.ShapeDtypeStruct((4, 64, 64), jnp.float32))


@pytest.fixture(scope="module")
def dump():
    return dump_xla_buffers(scanned, ARGS)


def test_real_dump_parses_and_matches_memory_analysis(dump):
    temps = [a for a in dump.allocations if a.is_temp]
    assert len(temps) == 1
    compiled = jax.jit(scanned).lower(*ARGS).compile(compiler_options=dict(FUSION_OFF))
    assert temps[0].size == dump.temp_size_in_bytes == compiled.memory_analysis().temp_size_in_bytes
    assert any(v.phi for v in temps[0].values), "the scan's carried values are phis"
    assert any(a.kinds[0].startswith("parameter 0, shape |f32[32,64]|") for a in dump.allocations)
    live = dump.live_ranges
    assert all(v.key in live.ranges for v in temps[0].values)
    assert all(0 <= first <= last < len(live.sequence) + 1 for first, last in live.ranges.values())


def test_a_function_dumped_again_is_compiled_again_past_the_persistent_cache(dump):
    """The suite runs with JAX's persistent compilation cache on (`conftest.py`), which keys a
    compile without its dump options: a second dump of the same function found the first one's
    executable, compiled nothing and dumped nothing."""
    assert jax.config.jax_compilation_cache_dir
    again = dump_xla_buffers(scanned, ARGS)
    assert again.allocations == dump.allocations and again.temp_size_in_bytes == dump.temp_size_in_bytes


def test_rebuilt_problem_admits_xla_placement(dump):
    rebuilt = temp_problem(dump)
    problem = rebuilt.problem
    assert rebuilt.xla_temp == dump.temp_size_in_bytes
    assert problem.companions, "the loop-carried buffer around the body's gap is a companion group"
    raw = Problem.from_intervals(problem.sizes, problem.starts, problem.ends, companions=problem.companions)
    check_plan(raw, rebuilt.xla_offsets)
    assert rebuilt.end(rebuilt.xla_offsets) == rebuilt.xla_temp
    assert rebuilt.bound == max_live(raw) <= rebuilt.xla_temp
    assert sum(len(v) for v in rebuilt.values) == sum(v.size > 0 for v in next(a for a in dump.allocations if a.is_temp).values)


def test_every_allocator_replans_xla_buffers_validly(dump):
    replan = replan_problem(temp_problem(dump), "scanned")
    assert [r.allocator for r in replan.results] == list(ALLOCATORS)
    for r in replan.results:
        assert r.bytes >= replan.bound
    assert replan.result("best").bytes <= replan.xla_temp
    text = replan.table()
    assert "XLA heap simulator" in text and "max-live bound" in text and "nnc" in text


def test_replan_xla_buffers_end_to_end():
    def mlp(x, w1, w2):
        return jnp.tanh(jnp.tanh(x @ w1) @ w2).sum()

    args = (jnp.ones((16, 32)), jnp.ones((32, 32)), jnp.ones((32, 8)))
    replan = replan_xla_buffers(mlp, args, allocators=["nnc", "best"])
    assert replan.function == "mlp" and [r.allocator for r in replan.results] == ["nnc", "best"]
    assert replan.bound <= replan.result("nnc").bytes


def test_touching_values_at_one_offset_are_one_buffer_and_loop_pieces_companions():
    assignment = """BufferAssignment:
allocation 0: size 4096, preallocated-temp:
 value: <1 a @0> (size=1024,offset=0): f32[256]{0}
 value: <2 b @0> (size=1024,offset=0): f32[256]{0}
 value: <3 c @0> (size=1024,offset=1024): f32[256]{0}
 value: <4 d @0> (size=512,offset=0): f32[128]{0}
 value: <5 p{1} (phi) @0> (size=1024,offset=2048): f32[256]{0}
 value: <6 e @0> (size=1024,offset=2048): f32[256]{0}
 value: <7 w{1} (phi) @0> (size=1024,offset=2048): f32[256]{0}
"""
    live = """HloLiveRange (max 9):
  InstructionSequence:
    0:a
  BufferLiveRange:
    a{}:0-2
    b{}:2-4
    c{}:1-3
    d{}:6-7
    p{1}:0-3
    e{}:4-5
    w{1}:7-9
"""
    from jaxalloc.xla.buffers import XlaDump

    dump = XlaDump(tuple(parse_buffer_assignment(assignment)), parse_live_ranges(live), 4096, "ba.txt", "lr.txt")
    rebuilt = temp_problem(dump, alignment=1)
    keys = [tuple(v.key for v in values) for values in rebuilt.values]
    assert keys == [("a{}", "b{}"), ("d{}",), ("c{}",), ("p{1}",), ("e{}",), ("w{1}",)]
    p = rebuilt.problem
    assert list(zip(p.starts.tolist(), p.ends.tolist())) == [(0, 5), (6, 8), (1, 4), (0, 4), (4, 6), (7, 10)]
    assert p.companions == ((3, 5),)
    check_plan(p, rebuilt.xla_offsets)


def test_value_without_live_range_is_reported():
    from jaxalloc.xla.buffers import XlaDump

    assignment = "BufferAssignment:\nallocation 0: size 8, preallocated-temp:\n value: <1 a @0> (size=8,offset=0): f32[2]{0}\n"
    live = "HloLiveRange (max 1):\n  InstructionSequence:\n    0:b\n  BufferLiveRange:\n    b{}:0-1\n"
    dump = XlaDump(tuple(parse_buffer_assignment(assignment)), parse_live_ranges(live), 8, "ba.txt", "lr.txt")
    with pytest.raises(XlaDumpError, match=r"lr.txt: no live range for a\{\}"):
        temp_problem(dump)


@pytest.mark.parametrize(
    "line, message",
    [
        ("allocation 9: size 8, frobnicated:", "unknown allocation attribute"),
        (" value: <1 a @0> (size=8 offset=0): f32[2]", "not an allocation header or a value line"),
        ("Used values:", "not an allocation header or a value line"),
    ],
)
def test_unexpected_buffer_assignment_line_names_file_and_line(line, message):
    text = "BufferAssignment:\nallocation 0: size 8, preallocated-temp:\n" + line + "\n"
    with pytest.raises(XlaDumpError, match=rf"^dump.txt:3: {message}"):
        parse_buffer_assignment(text, "dump.txt")


@pytest.fixture(scope="module")
def raw_dump() -> dict[str, str]:
    """The two dump files of a real compilation, as text."""
    with tempfile.TemporaryDirectory() as directory:
        jax.jit(_named_afresh(scanned)).lower(*ARGS).compile(compiler_options={**FUSION_OFF, "xla_dump_to": directory})
        texts = {}
        for kind in ("buffer-assignment", "live-range"):
            (path,) = glob.glob(os.path.join(directory, f"*after_optimizations-{kind}.txt"))
            texts[kind] = Path(path).read_text()
        return texts


def test_unexpected_line_in_real_live_range_dump_is_reported(raw_dump):
    text = raw_dump["live-range"]
    assert parse_live_ranges(text).ranges
    lines = text.splitlines()
    position = lines.index("  BufferLiveRange:") + 2
    lines.insert(position, "    something unexpected")
    with pytest.raises(XlaDumpError, match=rf"^lr.txt:{position + 1}: unexpected line in section BufferLiveRange"):
        parse_live_ranges("\n".join(lines), "lr.txt")


def test_unexpected_line_in_real_buffer_assignment_dump_is_reported(raw_dump):
    text = raw_dump["buffer-assignment"]
    assert any(a.is_temp for a in parse_buffer_assignment(text))
    lines = text.splitlines()
    lines.insert(3, " value: <99 x @0> (size=4,offset=0) f32[]")
    with pytest.raises(XlaDumpError, match=r"^ba.txt:4: not an allocation header or a value line"):
        parse_buffer_assignment("\n".join(lines), "ba.txt")


def test_wrong_first_line_is_reported():
    with pytest.raises(XlaDumpError, match=r"^x.txt:1: expected 'BufferAssignment:'"):
        parse_buffer_assignment("HloModule m\n", "x.txt")
    with pytest.raises(XlaDumpError, match=r"^y.txt:1: expected 'HloLiveRange"):
        parse_live_ranges("", "y.txt")


def test_offsets_of_rebuilt_problem_are_xla_alignment(dump):
    rebuilt = temp_problem(dump, alignment=64)
    assert np.all(rebuilt.xla_offsets % 64 == 0), "XLA CPU aligns its temp buffers to 64 bytes"
    check_plan(rebuilt.problem, rebuilt.xla_offsets)
