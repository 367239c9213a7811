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


# ---------------------------------------------------------------------------------------------
# The programs of `programs.py`: inference, training steps and a solver, at CPU-friendly sizes.
# Parameters are pytrees (lists and tuples of arrays); every `*_args()` is seeded.


def _normal(key, shape, fan_in):
    return jax.random.normal(key, shape) / np.sqrt(fan_in)


def mse(prediction, target):
    return jnp.mean((prediction - target) ** 2)


def sgd(params, grads, learning_rate: float = 1e-2):
    return jax.tree_util.tree_map(lambda p, g: p - learning_rate * g, params, grads)


def train_step(loss):
    """`(params, *batch) -> (loss, params - lr * grad)`: one SGD step of `loss(params, *batch)`."""

    def step(params, *batch):
        value, grads = jax.value_and_grad(loss)(params, *batch)
        return value, sgd(params, grads)

    step.__name__ = f"{loss.__name__}_train_step"
    return step


# MLP: batch 128, 784 -> 512 -> 512 -> 512 -> 10, ReLU.


def mlp(params, x):
    for w, b in params[:-1]:
        x = jax.nn.relu(x @ w + b)
    w, b = params[-1]
    return x @ w + b


def mlp_params(widths=(784, 512, 512, 512, 10), seed: int = 1):
    keys = jax.random.split(jax.random.key(seed), len(widths) - 1)
    return [(_normal(k, (m, n), m), jnp.zeros(n)) for k, m, n in zip(keys, widths[:-1], widths[1:])]


def mlp_args(batch: int = 128):
    return mlp_params(), jax.random.normal(jax.random.key(2), (batch, 784))


def mlp_loss(params, x, labels):
    logits = mlp(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def mlp_train_args(batch: int = 128):
    params, x = mlp_args(batch)
    return params, x, jax.random.randint(jax.random.key(3), (batch,), 0, 10)


# CNN: batch 16 of 32x32x3 images (NHWC), conv 3x3 32 -> max-pool -> conv 3x3 64 -> max-pool
# -> conv 3x3 64 -> global average -> dense 10.


def _conv(x, w, b):
    y = jax.lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jax.nn.relu(y + b)


def _max_pool(x):
    return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")


def cnn(params, x):
    (w1, b1), (w2, b2), (w3, b3), (wd, bd) = params
    x = _max_pool(_conv(x, w1, b1))
    x = _max_pool(_conv(x, w2, b2))
    x = _conv(x, w3, b3).mean(axis=(1, 2))
    return x @ wd + bd


def cnn_params(seed: int = 4):
    k = jax.random.split(jax.random.key(seed), 4)
    return [
        (_normal(k[0], (3, 3, 3, 32), 27), jnp.zeros(32)),
        (_normal(k[1], (3, 3, 32, 64), 288), jnp.zeros(64)),
        (_normal(k[2], (3, 3, 64, 64), 576), jnp.zeros(64)),
        (_normal(k[3], (64, 10), 64), jnp.zeros(10)),
    ]


def cnn_args(batch: int = 16):
    return cnn_params(), jax.random.normal(jax.random.key(5), (batch, 32, 32, 3))


def cnn_loss(params, x, labels):
    logits = cnn(params, x)
    return -jnp.mean(jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=1))


def cnn_train_args(batch: int = 16):
    params, x = cnn_args(batch)
    return params, x, jax.random.randint(jax.random.key(6), (batch,), 0, 10)


# Transformer: 4 pre-norm layers of `transformer_layer`, 128 tokens, width 128, 4 heads.


def transformer(layers, x):
    for weights in layers:
        x = transformer_layer(x, *weights)
    return layer_norm(x)


def transformer_params(layers: int = 4, d: int = 128, seed: int = 7):
    def layer(key):
        k = jax.random.split(key, 6)
        return (
            *(_normal(k[i], (d, d), d) for i in range(4)),
            _normal(k[4], (d, 4 * d), d),
            _normal(k[5], (4 * d, d), 4 * d),
        )

    return [layer(key) for key in jax.random.split(jax.random.key(seed), layers)]


def transformer_args(tokens: int = 128, d: int = 128, layers: int = 4):
    return transformer_params(layers, d), jax.random.normal(jax.random.key(8), (tokens, d))


def transformer_loss(layers, x, target):
    return mse(transformer(layers, x), target)


def transformer_train_args(tokens: int = 128, d: int = 128, layers: int = 4):
    params, x = transformer_args(tokens, d, layers)
    return params, x, jax.random.normal(jax.random.key(9), (tokens, d))


# The same transformer as a `lax.scan` over weights stacked on a leading layer axis.


def scanned_transformer(stacked, x):
    def body(h, weights):
        return transformer_layer(h, *weights), None

    x, _ = jax.lax.scan(body, x, stacked)
    return layer_norm(x)


def _stacked(params):
    """Per-layer weight lists as one array per weight with a leading layer axis."""
    return tuple(jnp.stack(ws) for ws in zip(*params))


def scanned_transformer_args(tokens: int = 128, d: int = 128, layers: int = 4):
    params, x = transformer_args(tokens, d, layers)
    return _stacked(params), x


def scanned_transformer_loss(stacked, x, target):
    return mse(scanned_transformer(stacked, x), target)


def scanned_transformer_train_args(tokens: int = 128, d: int = 128, layers: int = 4):
    params, x, target = transformer_train_args(tokens, d, layers)
    return _stacked(params), x, target


# LSTM: a scan over 32 time steps, batch 32, input 128, hidden 256; a dense head on every step.


def lstm(params, xs):
    w_x, w_h, b, w_out = params
    batch, hidden = xs.shape[1], w_h.shape[0]

    def cell(carry, x):
        h, c = carry
        i, f, g, o = jnp.split(x @ w_x + h @ w_h + b, 4, axis=-1)
        c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
        h = jax.nn.sigmoid(o) * jnp.tanh(c)
        return (h, c), h

    zeros = jnp.zeros((batch, hidden))
    _, hs = jax.lax.scan(cell, (zeros, zeros), xs)
    return hs @ w_out


def lstm_params(inputs: int = 128, hidden: int = 256, outputs: int = 128, seed: int = 10):
    k = jax.random.split(jax.random.key(seed), 3)
    return (
        _normal(k[0], (inputs, 4 * hidden), inputs),
        _normal(k[1], (hidden, 4 * hidden), hidden),
        jnp.zeros(4 * hidden),
        _normal(k[2], (hidden, outputs), hidden),
    )


def lstm_args(steps: int = 32, batch: int = 32, inputs: int = 128):
    return lstm_params(inputs), jax.random.normal(jax.random.key(11), (steps, batch, inputs))


def lstm_loss(params, xs, targets):
    return mse(lstm(params, xs), targets)


def lstm_train_args(steps: int = 32, batch: int = 32, inputs: int = 128):
    params, xs = lstm_args(steps, batch, inputs)
    return params, xs, jax.random.normal(jax.random.key(12), (steps, batch, 128))


# Solvers: `lax.while_loop` until convergence.


def conjugate_gradient(a, b, tol: float = 1e-5, max_iterations: int = 1000):
    """Solves `a x = b` for a symmetric positive definite `a`, stopping at `|r| <= tol |b|`."""

    threshold = tol**2 * jnp.vdot(b, b)

    def cond(state):
        *_, rr, k = state
        return (rr > threshold) & (k < max_iterations)

    def body(state):
        x, r, p, rr, k = state
        ap = a @ p
        alpha = rr / jnp.vdot(p, ap)
        x, r = x + alpha * p, r - alpha * ap
        rr_next = jnp.vdot(r, r)
        return x, r, r + (rr_next / rr) * p, rr_next, k + 1

    x = jnp.zeros_like(b)
    x, *_ = jax.lax.while_loop(cond, body, (x, b, b, jnp.vdot(b, b), 0))
    return x


def conjugate_gradient_args(n: int = 512):
    m = jax.random.normal(jax.random.key(13), (n, n)) / np.sqrt(n)
    return m @ m.T + jnp.eye(n), jax.random.normal(jax.random.key(14), (n,))


def newton_softplus_root(a, y, tol: float = 1e-6, max_iterations: int = 50):
    """Newton's method for `x` with `softplus(a @ x) + x = y`, batched over the columns of `y`."""

    def residual(x):
        return jax.nn.softplus(a @ x) + x - y

    def cond(state):
        x, k = state
        return (jnp.max(jnp.abs(residual(x))) > tol) & (k < max_iterations)

    def body(state):
        x, k = state
        jacobian = jax.nn.sigmoid(a @ x)[:, None] * a + jnp.eye(a.shape[0])
        return x - jnp.linalg.solve(jacobian, residual(x)), k + 1

    x, _ = jax.lax.while_loop(cond, body, (jnp.zeros_like(y), 0))
    return x


def newton_softplus_root_args(n: int = 256):
    return (
        jax.random.normal(jax.random.key(15), (n, n)) / np.sqrt(n),
        jax.random.normal(jax.random.key(16), (n,)),
    )
