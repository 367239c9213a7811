"""Programs written the way users of optax, flax, equinox and `lax.switch` write them, at benchmark sizes.

The flax and equinox training steps are those of the test corpus (`jaxalloc/testing/library.py`),
given larger batches here; their models are the corpus's own.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import models
import optax

from jaxalloc.testing import library as library_programs

CLIP_ADAM = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-3))


def clip_adam_update(params, grads, opt_state):
    """optax: gradients clipped by their global norm, then one Adam update of a pytree of params."""
    updates, opt_state = CLIP_ADAM.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state


def clip_adam_update_args():
    """The MLP's parameters (784 -> 512 -> 512 -> 512 -> 10, 3.56 MiB), gradients of their shapes, a fresh state."""
    params = models.mlp_params()
    grads = jax.tree_util.tree_map(lambda p: jnp.full_like(p, 0.01), params)
    return params, grads, CLIP_ADAM.init(params)


def nnx_conv_bn_train_step_args(batch: int = 64, side: int = 32):
    """The corpus's flax.nnx conv + batch norm + dropout net on a batch of 64 32x32x3 images."""
    state, _, _, key = library_programs._nnx_cnn_train_args()
    x = jax.random.normal(jax.random.key(30), (batch, side, side, 3))
    labels = jax.random.randint(jax.random.key(31), (batch,), 0, 5)
    return state, x, labels, key


def eqx_mlp_train_step_args(batch: int = 4096):
    """The corpus's eqx.nn.MLP (6 -> 16 -> 16 -> 3) with optax.adamw, on a batch of 4096."""
    params, opt_state, _, _ = library_programs._eqx_mlp_train_args()
    x = jax.random.normal(jax.random.key(32), (batch, 6))
    return params, opt_state, x, jax.random.normal(jax.random.key(33), (batch, 3))


def _big_branch(x, w):
    return jnp.tanh(x @ w) @ w.T


def _scale_branch(x, w):
    return 2.0 * x


def _shift_branch(x, w):
    return x + w[0]


def switch(index, x, w):
    """`lax.switch` of a two-matmul branch, `tanh(x @ w) @ w.T`, and two cheap elementwise branches."""
    return jax.lax.switch(index, (_big_branch, _scale_branch, _shift_branch), x, w)


def switch_args(rows: int = 256, width: int = 256):
    """w is 256x256 f32 (256 KiB), x 256 rows."""
    x = jax.random.normal(jax.random.key(34), (rows, width))
    w = jax.random.normal(jax.random.key(35), (width, width)) / width**0.5
    return jnp.int32(0), x, w


def library_programs_list() -> list:
    """(name, function, example arguments) of the programs above, as `programs.programs()` gives its own."""
    corpus = library_programs
    return [
        ("optax clip+adam update", clip_adam_update, clip_adam_update_args()),
        ("flax nnx conv+BN train step", corpus.nnx_cnn_train_step, nnx_conv_bn_train_step_args()),
        ("equinox MLP train step", corpus.eqx_mlp_train_step, eqx_mlp_train_step_args()),
        ("lax.switch (matmul branch)", switch, switch_args()),
    ]
