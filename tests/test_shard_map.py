"""Planned functions inside `jax.shard_map` over eight host devices, each shard's program planned.

The host platform's device count is fixed when JAX starts, so the checks run in a process of their
own (`XLA_FLAGS=--xla_force_host_platform_device_count=8`): a model sharded over its batch, whose
gradient by replicated weights needs the `psum` of every shard's (compiled; checked, the model
alone), and corpus programs replicated on every device, each against `shard_map` of the function
itself, under `jax.jit` and `jax.grad`.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    import jax, jax.numpy as jnp
    from jax.sharding import NamedSharding, PartitionSpec as P
    import jaxalloc
    from jaxalloc.testing.corpus import BY_NAME
    from jaxalloc.testing.differential import assert_same
    from jaxalloc.testing.transformations import TRANSFORMATIONS

    assert jax.device_count() == 8
    mesh = jax.make_mesh((8,), ("x",))

    def sharded(f, in_specs, out_specs):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs)

    model = lambda x, w: jnp.tanh(x @ w)
    x = jax.device_put(jnp.arange(64.0).reshape(16, 4) / 64, NamedSharding(mesh, P("x")))
    w = jax.device_put(jnp.ones((4, 3)), NamedSharding(mesh, P()))
    for mode in ("compiled", "checked"):
        ours = sharded(jaxalloc.planned(model, mode=mode), (P("x"), P()), P("x"))
        theirs = sharded(model, (P("x"), P()), P("x"))
        assert_same(jax.jit(ours)(x, w), jax.jit(theirs)(x, w))
        if mode == "compiled":  # an op-by-op mode is a host callback on each device (README, limits)
            loss = lambda f: (lambda w: f(x, w).sum())
            assert_same(jax.jit(jax.grad(loss(ours)))(w), jax.jit(jax.grad(loss(theirs)))(w), {"rtol": 1e-5, "atol": 1e-6})

    with jax.set_mesh(mesh):
        for name in ("mlp_train_step", "scan_rnn", "cond_bool", "pytrees"):
            program = BY_NAME[name]
            args = program.make_args()
            replicated = lambda f: sharded(lambda *a: f(*a), P(), P())
            for transformation in ("jit", "grad"):
                apply = TRANSFORMATIONS[transformation]
                expected = apply(jax.jit(replicated(program.fn)), args)
                got = apply(jax.jit(replicated(jaxalloc.planned(program.fn))), args)
                assert_same(got, expected, {"rtol": 1e-4, "atol": 1e-5})
    print("shard_map ok")
''')


def test_planned_functions_in_shard_map_equal_the_function_s_own():
    tests = Path(__file__).parent
    env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=8", PYTHONPATH=str(tests),
               JAX_PLATFORMS="cpu")
    done = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0 and "shard_map ok" in done.stdout, done.stderr[-3000:]
