"""Realistic JAX programs for the benchmarks and the README's example.

Each model comes with a `*_args()` function returning example arguments, so the command
line can run it: `jaxalloc ir benchmarks/models.py:transformer_layer --args-from transformer_layer_args`.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np


def layer_norm(h):
    mean = h.mean(-1, keepdims=True)
    return (h - mean) / jnp.sqrt(((h - mean) ** 2).mean(-1, keepdims=True) + 1e-5)


def transformer_layer(x, wq, wk, wv, wo, w1, w2, heads: int = 4):
    """One pre-norm transformer block: multi-head attention and a GELU MLP."""
    t, d = x.shape
    h = layer_norm(x)
    q, k, v = (jnp.reshape(h @ w, (t, heads, d // heads)).transpose(1, 0, 2) for w in (wq, wk, wv))
    attention = jax.nn.softmax(q @ k.transpose(0, 2, 1) / np.sqrt(d // heads), axis=-1) @ v
    x = x + attention.transpose(1, 0, 2).reshape(t, d) @ wo
    return x + jax.nn.gelu(layer_norm(x) @ w1) @ w2


def transformer_layer_args(tokens: int = 32, d: int = 64):
    key = jax.random.split(jax.random.key(0), 7)
    return (
        jax.random.normal(key[0], (tokens, d)),
        *(jax.random.normal(key[i], (d, d)) / np.sqrt(d) for i in range(1, 5)),
        jax.random.normal(key[5], (d, 4 * d)) / np.sqrt(d),
        jax.random.normal(key[6], (4 * d, d)) / np.sqrt(4 * d),
    )


def elementwise_chain(x, length: int = 250):
    """4 x `length` cheap elementwise ops: interpretation overhead dominates."""
    for _ in range(length):
        x = -(jnp.sin(x) * 0.5 + 0.25)
    return x


def elementwise_chain_args(n: int = 256):
    return (jnp.ones(n),)
