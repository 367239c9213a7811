"""The caches of a planned function: a plan made once per signature, and the persistent kernel cache
(`jaxalloc.config.update("jaxalloc_cache_dir", ...)`), from which a later planned function, in this
process or another, runs its kernel with no conversion, passes, plan or kernel trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jaxalloc
from jaxalloc import api
from jaxalloc.execution.compiled import cache

PLANNING = {"convert", "plan", "kernel trace", *api.DEFAULT_PASSES}
"""The phases a kernel from the cache skips."""


def rnn(h, ws):
    return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), h.sum()), h, ws)


def rnn_args(rows: int = 8):
    return jnp.ones((rows, 32)), jnp.ones((4, 32, 32)) / 32


def assert_same(outputs, expected) -> None:
    for got, want in zip(jax.tree.leaves(outputs), jax.tree.leaves(expected), strict=True):
        assert jax.typeof(got) == jax.typeof(want)
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)


@pytest.fixture
def cache_dir(tmp_path):
    """The kernel cache on, in a folder of the test's own."""
    folder = tmp_path / "kernels"
    before = cache.config.jaxalloc_cache_dir
    jaxalloc.config.update("jaxalloc_cache_dir", folder)
    yield folder
    jaxalloc.config.update("jaxalloc_cache_dir", before)


def entries(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.kernel")) if folder.exists() else []


def test_a_second_plan_costs_nothing(monkeypatch):
    made = []
    make_plan = api.make_plan
    monkeypatch.setattr(api, "make_plan", lambda *a, **k: made.append(1) or make_plan(*a, **k))
    f = jaxalloc.planned(rnn, arena="always")
    first = f.plan(*rnn_args())
    second = f.plan(*rnn_args())
    assert len(made) == 1 and second.module is first.module
    f(*rnn_args())  # the call runs the same plan: planned again for nothing
    assert len(made) == 1
    f.plan(*rnn_args(rows=16))  # another signature: a plan of its own
    assert len(made) == 2


def test_the_cache_is_off_by_default_and_then_reads_and_writes_nothing(tmp_path, monkeypatch):
    assert cache.Config().jaxalloc_cache_dir == (os.environ.get(cache.ENVIRONMENT) or None)
    monkeypatch.setattr(cache.config, "jaxalloc_cache_dir", None)
    for name in ("load", "store", "forget"):
        monkeypatch.setattr(cache, name, lambda *a, _name=name: pytest.fail(f"cache.{_name} called with the cache off"))
    monkeypatch.chdir(tmp_path)
    f = jaxalloc.planned(rnn)
    assert_same(f(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    assert not {"cache load", "cache store"} & set(f.last_run.phases)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("arena", ["smaller", "always"])
def test_a_kernel_from_the_cache_skips_planning_and_gives_jits_outputs(cache_dir, arena):
    """The kernel stored is the one the first call chose (`arena="smaller"`: the plan's, or the module on
    XLA's own buffers), and a later process runs that one."""
    expected = jax.jit(rnn)(*rnn_args())
    first = jaxalloc.planned(rnn, arena=arena)
    assert_same(first(*rnn_args()), expected)
    assert PLANNING <= set(first.last_run.phases) and "cache store" in first.last_run.phases
    (entry,) = entries(cache_dir)

    again = jaxalloc.planned(rnn, arena=arena)  # a new function: nothing in memory
    assert_same(again(*rnn_args()), expected)
    phases = again.last_run.phases
    assert {"trace", "cache load", "call"} <= set(phases) and not PLANNING & set(phases)
    assert again.last_run.arena_bytes == first.last_run.arena_bytes
    assert again.last_run.xla_buffers == first.last_run.xla_buffers
    assert first.last_run.arena_bytes == (0 if first.last_run.xla_buffers else first.plan(*rnn_args()).arena_bytes)
    assert not (arena == "always" and first.last_run.xla_buffers)
    assert_same(again(*rnn_args()), expected)  # and warm
    assert again.last_run.phases == {}
    assert again.plan(*rnn_args()).arena_bytes == first.plan(*rnn_args()).arena_bytes > 0  # plan() still plans
    assert entries(cache_dir) == [entry]


def test_a_kernel_made_under_disable_jit_is_stored_and_loaded(cache_dir):
    """Under `jax.disable_jit()` a planned call runs its kernel, so the cache keeps it as any other."""
    with jax.disable_jit():
        jaxalloc.planned(rnn)(*rnn_args())
        (entry,) = entries(cache_dir)
        again = jaxalloc.planned(rnn)
        assert_same(again(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    assert "cache load" in again.last_run.phases and not PLANNING & set(again.last_run.phases)
    assert entries(cache_dir) == [entry]


@pytest.mark.parametrize("keep_arena", [False, True])
def test_a_kernel_from_the_cache_is_called_as_it_was_built(cache_dir, keep_arena):
    """The stored module makes its arena as the kernel does (no arena taken or handed back), or, with
    `keep_arena`, takes the kept one, donated to each call and handed back."""
    jaxalloc.planned(rnn, keep_arena=keep_arena)(*rnn_args())
    (entry,) = entries(cache_dir)
    assert cache.load(entry.stem).makes_arena == (not keep_arena)
    hit = jaxalloc.planned(rnn, keep_arena=keep_arena)
    for _ in range(2):
        assert_same(hit(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    (traced,) = hit._cache.values()
    (kernel,) = traced.kernels.values()
    assert kernel.loaded and kernel.makes_arena == (not keep_arena)
    assert (kernel.arena is not None) == keep_arena
    arena = [a.shape for a in kernel.traced(jax.tree.leaves(rnn_args())).jaxpr.in_avals].count((kernel.words,))
    assert arena == int(keep_arena)
    assert hit.last_run.held_bytes == (hit.last_run.arena_bytes if keep_arena else 0)


def test_an_entry_of_another_format_is_not_read(cache_dir, monkeypatch):
    """An entry written by a jaxalloc whose kernels were called otherwise (format 1: every kernel took
    its arena) has another key, and is not read under this one either."""
    f = jaxalloc.planned(rnn, arena="always")
    f(*rnn_args())
    (entry,) = entries(cache_dir)
    stored = cache.load(entry.stem)
    (traced,) = f._cache.values()
    options = {"mode": "compiled"}
    key = cache.kernel_key(traced.closed_jaxpr, options)
    monkeypatch.setattr(cache, "FORMAT", b"jaxalloc kernel 1\n")
    assert cache.kernel_key(traced.closed_jaxpr, options) != key
    cache.store(entry.stem, stored)  # written again in format 1
    monkeypatch.undo()
    assert cache.load(entry.stem) is None
    again = jaxalloc.planned(rnn, arena="always")
    assert_same(again(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    assert "plan" in again.last_run.phases and cache.load(entry.stem).makes_arena  # and written again


def test_a_changed_option_or_shape_is_another_entry(cache_dir):
    jaxalloc.planned(rnn, arena="always")(*rnn_args())
    others = [
        (jaxalloc.planned(rnn, alignment=128, arena="always"), rnn_args()),
        (jaxalloc.planned(rnn, passes=("jx-dce",), arena="always"), rnn_args()),
        (jaxalloc.planned(rnn, keep_arena=True), rnn_args()),
        (jaxalloc.planned(rnn, arena="always"), rnn_args(rows=16)),
        (jaxalloc.planned(rnn, arena="smaller"), rnn_args()),
    ]
    for f, args in others:
        assert_same(f(*args), jax.jit(rnn)(*args))
        assert "plan" in f.last_run.phases and "cache store" in f.last_run.phases
    assert len(entries(cache_dir)) == 6
    hit = jaxalloc.planned(rnn, keep_arena=True)
    for _ in range(2):
        assert_same(hit(*rnn_args()), jax.jit(rnn)(*rnn_args()))
        assert hit.last_run.held_bytes == hit.last_run.arena_bytes > 0
    assert len(entries(cache_dir)) == 6


def test_a_closed_over_constant_is_part_of_the_key(cache_dir):
    def scaled(scale):
        weights = np.full((16,), scale, np.float32)
        return lambda x: jnp.tanh(x * weights)

    x = jnp.ones((16,))
    for scale in (1.0, 2.0):
        f = jaxalloc.planned(scaled(scale))
        assert_same(f(x), jnp.tanh(x * scale))
    assert len(entries(cache_dir)) == 2


@pytest.mark.parametrize("damage", ["truncated", "flipped"])
def test_a_damaged_entry_is_ignored_and_written_again(cache_dir, damage):
    jaxalloc.planned(rnn, arena="always")(*rnn_args())
    (entry,) = entries(cache_dir)
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2] if damage == "truncated" else data[:-10] + bytes(10))
    f = jaxalloc.planned(rnn, arena="always")
    assert_same(f(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    assert "plan" in f.last_run.phases
    assert cache.load(entry.stem) is not None  # written again, whole
    again = jaxalloc.planned(rnn, arena="always")
    again(*rnn_args())
    assert "plan" not in again.last_run.phases


def test_an_entry_that_does_not_compile_is_built_again(cache_dir):
    jaxalloc.planned(rnn, arena="always")(*rnn_args())
    (entry,) = entries(cache_dir)
    key = entry.stem
    stored = cache.load(key)
    cache.store(key, type(stored)(**{**vars(stored), "module": b"not a module"}))  # whole, but no module
    f = jaxalloc.planned(rnn, arena="always")
    with pytest.warns(RuntimeWarning, match="could not run, built again"):
        assert_same(f(*rnn_args()), jax.jit(rnn)(*rnn_args()))
    assert "plan" in f.last_run.phases
    assert cache.load(key).module != b"not a module"


def test_a_donated_argument_is_deleted_as_jit_deletes_it_after_a_hit(cache_dir):
    def sgd(params, grads):
        return jax.tree.map(lambda p, g: p - 0.1 * g, params, grads)

    def args():
        return {"w": jnp.ones((64, 64)), "b": jnp.ones((64,))}, {"w": jnp.full((64, 64), 2.0), "b": jnp.full((64,), 2.0)}

    expected = jax.jit(sgd)(*args())
    for _ in range(2):
        f = jaxalloc.planned(sgd, donate_argnums=0, arena="always")
        params, grads = args()
        assert_same(f(params, grads), expected)
        assert all(p.is_deleted() for p in jax.tree.leaves(params))
    assert "plan" not in f.last_run.phases
    assert len(entries(cache_dir)) == 1


def test_a_function_with_a_callback_is_not_cached(cache_dir):
    def noisy(x):
        jax.debug.callback(lambda v: None, x)
        return jnp.sin(x) * 2

    f = jaxalloc.planned(noisy)
    assert_same(f(jnp.ones(8)), jnp.sin(jnp.ones(8)) * 2)
    assert entries(cache_dir) == []


def test_a_bad_config_option_is_one_line():
    with pytest.raises(jaxalloc.JaxallocError, match="unknown jaxalloc config option 'cache_dir'"):
        jaxalloc.config.update("cache_dir", "/tmp")
    with pytest.raises(jaxalloc.JaxallocError, match="must be a path or None"):
        jaxalloc.config.update("jaxalloc_cache_dir", 3)


CHILD = """
import json, sys
import jax, jax.numpy as jnp
import jaxalloc

def rnn(h, ws):
    return jax.lax.scan(lambda h, w: (jnp.tanh(h @ w), h.sum()), h, ws)

f = jaxalloc.planned(rnn)
out = f(jnp.ones((8, 32)), jnp.ones((4, 32, 32)) / 32)
print(json.dumps({"phases": sorted(f.last_run.phases), "out": [x.tolist() for x in jax.tree.leaves(out)]}))
"""


@pytest.mark.slow
def test_a_later_process_runs_the_kernel_from_the_cache(tmp_path):
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    environment = dict(os.environ, JAXALLOC_CACHE_DIR=str(tmp_path / "kernels"))
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, str(script)], env=environment, capture_output=True, text=True, check=True)
        runs.append(json.loads(done.stdout.splitlines()[-1]))
    assert PLANNING <= set(runs[0]["phases"])
    assert {"trace", "cache load"} <= set(runs[1]["phases"]) and not PLANNING & set(runs[1]["phases"])
    expected = jax.jit(rnn)(*rnn_args())
    for got, want in zip(runs[1]["out"], jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=2e-5, atol=2e-6)
