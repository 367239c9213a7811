"""The program corpus: JAX functions with example arguments, shared by tests and benchmarks.

`PROGRAMS` is the table: each `Program` has a unique `name`, the function `fn` (written for
`jax.jit` / `jaxalloc.planned`, so it takes only array-like arguments), and `make_args`,
which returns a fresh, deterministic tuple of example arguments (arrays, PRNG keys, pytrees
of arrays, or Python scalars where weak types are the point). `BY_NAME` indexes the table.
Shapes are small: the eager interpreter runs loops op by op, and the whole corpus is
checked against `jax.jit` in well under a minute.

    from jaxalloc.testing.corpus import PROGRAMS, BY_NAME
    for program in PROGRAMS:
        out = program.fn(*program.make_args())
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax


@dataclass(frozen=True)
class Program:
    """One corpus entry: `fn(*make_args())` is the program run on its example arguments."""

    name: str
    fn: Callable[..., Any]
    make_args: Callable[[], tuple]


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _normal(rng: np.random.Generator, *shape: int, scale: float = 1.0, dtype=jnp.float32) -> jax.Array:
    return jnp.asarray((scale * rng.standard_normal(shape)).astype(np.float32), dtype=dtype)


def _ints(rng: np.random.Generator, low: int, high: int, *shape: int, dtype=jnp.int32) -> jax.Array:
    return jnp.asarray(rng.integers(low, high, size=shape), dtype=dtype)


# ---------------------------------------------------------------------------------------------
# The four models (forward, jax.grad, and a value_and_grad training step each)
# ---------------------------------------------------------------------------------------------

LEARNING_RATE = 0.1


def _sgd(params, grads):
    return jax.tree_util.tree_map(lambda p, g: p - LEARNING_RATE * g, params, grads)


# MLP ----------------------------------------------------------------------------------------


def mlp(params, x):
    h = x
    for layer in params[:-1]:
        h = jax.nn.relu(h @ layer["w"] + layer["b"])
    last = params[-1]
    return h @ last["w"] + last["b"]


def _mlp_loss(params, x, y):
    return jnp.mean((mlp(params, x) - y) ** 2)


def mlp_grad(params, x, y):
    return jax.grad(_mlp_loss)(params, x, y)


def mlp_train_step(params, x, y):
    loss, grads = jax.value_and_grad(_mlp_loss)(params, x, y)
    return loss, _sgd(params, grads)


def _mlp_params(rng):
    sizes = (12, 32, 32, 4)
    return [
        {"w": _normal(rng, m, n, scale=1 / np.sqrt(m)), "b": _normal(rng, n, scale=0.1)}
        for m, n in zip(sizes[:-1], sizes[1:])
    ]


def _mlp_args():
    rng = _rng(0)
    return _mlp_params(rng), _normal(rng, 8, 12), _normal(rng, 8, 4)


def _mlp_forward_args():
    params, x, _ = _mlp_args()
    return params, x


# Convolution net ----------------------------------------------------------------------------


def convnet(params, x):
    """NCHW input; two 3x3 convolutions (the second strided), global average pool, dense."""
    h = lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=("NCHW", "OIHW", "NCHW"))
    h = jax.nn.relu(h + params["b1"][None, :, None, None])
    h = lax.conv(h, params["k2"], (2, 2), "VALID")
    h = jnp.tanh(h)
    h = jnp.mean(h, axis=(2, 3))
    return h @ params["w"]


def _convnet_loss(params, x, labels):
    logits = convnet(params, x)
    return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 5), axis=-1))


def convnet_grad(params, x, labels):
    return jax.grad(_convnet_loss)(params, x, labels)


def convnet_train_step(params, x, labels):
    loss, grads = jax.value_and_grad(_convnet_loss)(params, x, labels)
    return loss, _sgd(params, grads)


def _convnet_args():
    rng = _rng(1)
    params = {
        "k1": _normal(rng, 4, 3, 3, 3, scale=0.3),
        "b1": _normal(rng, 4, scale=0.1),
        "k2": _normal(rng, 6, 4, 3, 3, scale=0.3),
        "w": _normal(rng, 6, 5, scale=0.5),
    }
    return params, _normal(rng, 2, 3, 8, 8), _ints(rng, 0, 5, 2)


def _convnet_forward_args():
    params, x, _ = _convnet_args()
    return params, x


def pooled_cnn(params, x):
    """NHWC input, HWIO kernels: convolution, bias, ReLU and 2x2 max pooling, then a convolution,
    ReLU and 2x2 average pooling (a window sum): on the CPU XLA hands each stage to its library as
    one graph (`jx-fuse{library=true}`)."""
    h = lax.conv_general_dilated(x, params["k1"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = jax.nn.relu(h + params["b1"])
    h = lax.reduce_window(h, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
    h = lax.conv_general_dilated(h, params["k2"], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
    h = lax.reduce_window(jax.nn.relu(h), 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") * 0.25
    return jnp.mean(h, axis=(1, 2)) @ params["w"]


def pooled_cnn_train_step(params, x, labels):
    def loss(params):
        logits = pooled_cnn(params, x)
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * jax.nn.one_hot(labels, 5), axis=-1))

    value, grads = jax.value_and_grad(loss)(params)
    return value, _sgd(params, grads)


def _pooled_cnn_args():
    rng = _rng(47)
    params = {
        "k1": _normal(rng, 3, 3, 3, 24, scale=0.3),
        "b1": _normal(rng, 24, scale=0.1),
        "k2": _normal(rng, 3, 3, 24, 32, scale=0.1),
        "w": _normal(rng, 32, 5, scale=0.5),
    }
    return params, _normal(rng, 2, 16, 16, 3), _ints(rng, 0, 5, 2)


# Multi-head attention -----------------------------------------------------------------------

HEADS = 4


def attention(params, x):
    """Multi-head self-attention, softmax(Q K^T / sqrt(d)) V, then the output projection."""
    batch, seq, model = x.shape
    head = model // HEADS

    def split(t):
        return t.reshape(batch, seq, HEADS, head).transpose(0, 2, 1, 3)

    q, k, v = (split(x @ params[name]) for name in ("wq", "wk", "wv"))
    scores = jnp.einsum("bhqd,bhkd->bhqk", q, k) / np.sqrt(head).astype(np.float32)
    weights = jax.nn.softmax(scores, axis=-1)
    out = jnp.einsum("bhqk,bhkd->bhqd", weights, v).transpose(0, 2, 1, 3).reshape(batch, seq, model)
    return out @ params["wo"]


def _attention_loss(params, x, target):
    return jnp.mean((attention(params, x) - target) ** 2)


def attention_grad(params, x, target):
    return jax.grad(_attention_loss)(params, x, target)


def attention_train_step(params, x, target):
    loss, grads = jax.value_and_grad(_attention_loss)(params, x, target)
    return loss, _sgd(params, grads)


def _attention_args():
    rng = _rng(2)
    model = 16
    params = {name: _normal(rng, model, model, scale=1 / np.sqrt(model)) for name in ("wq", "wk", "wv", "wo")}
    return params, _normal(rng, 2, 6, model), _normal(rng, 2, 6, model)


def _attention_forward_args():
    params, x, _ = _attention_args()
    return params, x


# LayerNorm ----------------------------------------------------------------------------------


def layernorm(params, x, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    var = jnp.mean((x - mean) ** 2, axis=-1, keepdims=True)
    return (x - mean) * lax.rsqrt(var + eps) * params["scale"] + params["bias"]


def _layernorm_loss(params, x, target):
    return jnp.sum((layernorm(params, x) - target) ** 2) / x.shape[0]


def layernorm_grad(params, x, target):
    return jax.grad(_layernorm_loss)(params, x, target)


def layernorm_train_step(params, x, target):
    loss, grads = jax.value_and_grad(_layernorm_loss)(params, x, target)
    return loss, _sgd(params, grads)


def _layernorm_args():
    rng = _rng(3)
    params = {"scale": 1 + _normal(rng, 10, scale=0.1), "bias": _normal(rng, 10, scale=0.1)}
    return params, _normal(rng, 4, 10, scale=2.0), _normal(rng, 4, 10)


def _layernorm_forward_args():
    params, x, _ = _layernorm_args()
    return params, x


# ---------------------------------------------------------------------------------------------
# Loops
# ---------------------------------------------------------------------------------------------


def scan_rnn(w, h0, xs):
    """Forward scan: an Elman RNN returning the last state and every state."""

    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h

    return lax.scan(step, h0, xs)


def scan_reverse(xs):
    """Reverse scan: suffix sums and a running product, ys written from the back."""

    def step(carry, x):
        total, prod = carry
        total = total + x
        prod = prod * (1 + 0.1 * x)
        return (total, prod), total * 2

    return lax.scan(step, (jnp.zeros(xs.shape[1:]), jnp.ones(xs.shape[1:])), xs, reverse=True)


def _scan_args():
    rng = _rng(4)
    return _normal(rng, 5, 5, scale=0.4), _normal(rng, 5), _normal(rng, 6, 5)


def scan_zero_length_xs(c, xs):
    """xs with leading dimension 0: the carry passes through, ys are empty."""

    def step(carry, x):
        return carry * 2 + x.sum(), (x * carry, jnp.sin(x))

    return lax.scan(step, c, xs)


def _scan_zero_length_xs_args():
    return jnp.float32(1.5), jnp.zeros((0, 3), jnp.float32)


def scan_zero_length_no_xs(c):
    """`length=0` and no xs: ys of shape (0, ...)."""

    def step(carry, _):
        return carry + 1, jnp.stack([carry, carry * 2])

    return lax.scan(step, c, None, length=0)


def scan_multi(xs, ys_in):
    """Several carries (an int counter, a vector, a matrix) and several ys of different types."""

    def step(carry, inputs):
        count, vec, mat = carry
        x, y = inputs
        vec = vec * 0.9 + x
        mat = mat + jnp.outer(x, y)
        count = count + (x.sum() > 0).astype(jnp.int32)
        return (count, vec, mat), (vec.sum(), x[:2] > y, count, mat[0])

    init = (jnp.int32(0), jnp.zeros(xs.shape[1]), jnp.zeros((xs.shape[1], ys_in.shape[1])))
    return lax.scan(step, init, (xs, ys_in))


def _scan_multi_args():
    rng = _rng(5)
    return _normal(rng, 7, 3), _normal(rng, 7, 2)


def scan_unrolled_pytree(tree, xs):
    """A scan over a pytree of xs with a dict carry and `unroll=2`."""

    def step(carry, x):
        new = {"a": carry["a"] + x["u"], "b": carry["b"] * x["v"][0]}
        return new, {"sum": new["a"] + new["b"].sum()}

    return lax.scan(step, tree, xs, unroll=2)


def _scan_unrolled_args():
    rng = _rng(6)
    tree = {"a": _normal(rng, 3), "b": _normal(rng, 2)}
    xs = {"u": _normal(rng, 5, 3), "v": 1 + _normal(rng, 5, 2, scale=0.1)}
    return tree, xs


def newton_sqrt(a):
    """while_loop with a data-dependent exit: Newton's iteration for sqrt(a) until it converges."""

    def cond(state):
        x, previous, steps = state
        return (jnp.max(jnp.abs(x - previous)) > 1e-6) & (steps < 50)

    def body(state):
        x, _, steps = state
        return 0.5 * (x + a / x), x, steps + 1

    x, _, steps = lax.while_loop(cond, body, (a, a + 1.0, jnp.int32(0)))
    return x, steps


def _newton_args():
    return (jnp.asarray([0.5, 2.0, 9.0, 30.0], jnp.float32),)


def fori_loop_static(x):
    """fori_loop with static bounds (a scan in the jaxpr)."""
    return lax.fori_loop(0, 5, lambda i, v: v * 0.5 + jnp.sin(v) * i.astype(v.dtype), x)


def fori_loop_dynamic(x, n):
    """fori_loop with a traced trip count (a while_loop in the jaxpr)."""

    def body(i, carry):
        v, acc = carry
        return jnp.roll(v, 1) + 0.1 * i, acc + v.sum()

    return lax.fori_loop(0, n, body, (x, jnp.float32(0)))


def _fori_args():
    return (_normal(_rng(7), 6),)


def _fori_dynamic_args():
    return _normal(_rng(8), 6), jnp.int32(4)


# ---------------------------------------------------------------------------------------------
# Branches and nesting
# ---------------------------------------------------------------------------------------------


def cond_bool(x, y):
    """Boolean cond with two operands; both directions are run by the focused tests."""
    return lax.cond(jnp.sum(x) > 0, lambda a, b: (a * b, a.sum()), lambda a, b: (a - b, b.sum()), x, y)


def _cond_args():
    rng = _rng(9)
    return _normal(rng, 4, 3), _normal(rng, 4, 3)


def switch3(index, x):
    """switch with four branches; JAX clamps an out-of-range index to the nearest branch."""
    branches = [
        lambda v: jnp.sin(v),
        lambda v: v * 2.0,
        lambda v: jnp.cumsum(v),
        lambda v: -v + 1.0,
    ]
    return lax.switch(index, branches, x)


def _switch_args():
    return jnp.int32(1), _normal(_rng(10), 5)


def _switch_out_of_range_args():
    return jnp.int32(7), _normal(_rng(10), 5)


def nested_while_cond_scan(x, limit):
    """Three deep: a scan inside a cond inside a while_loop."""

    def inner_scan(v):
        def step(c, row):
            c = c + jnp.tanh(row)
            return c, c.sum()

        c, ys = lax.scan(step, jnp.zeros(v.shape[1:]), v)
        return v + c + ys[:, None]

    def body(state):
        v, k = state
        v = lax.cond(k % 2 == 0, inner_scan, lambda u: u * 0.5, v)
        return v, k + 1

    return lax.while_loop(lambda s: (s[1] < limit) & (jnp.abs(s[0]).max() < 1e3), body, (x, jnp.int32(0)))


def _nested_args():
    return _normal(_rng(11), 3, 4), jnp.int32(5)


def nested_scan_while_switch(xs):
    """Three deep the other way: a switch inside a while_loop inside a scan."""

    def step(carry, x):
        def body(state):
            v, k = state
            v = lax.switch(k, [lambda u: u + 1.0, lambda u: u * 1.5, lambda u: jnp.sqrt(jnp.abs(u))], v)
            return v, k + 1

        v, _ = lax.while_loop(lambda s: s[1] < 3, body, (x + carry, jnp.int32(0)))
        return carry + v.mean(), v

    return lax.scan(step, jnp.float32(0), xs)


def _nested_scan_args():
    return (_normal(_rng(12), 4, 3),)


def grad_through_scan(w, h0, xs):
    def loss(w):
        h, hs = scan_rnn(w, h0, xs)
        return jnp.sum(hs**2) + jnp.sum(h)

    return jax.value_and_grad(loss)(w)


def grad_through_cond(x, y):
    def loss(x):
        out, total = cond_bool(x, y)
        return jnp.sum(jnp.sin(out)) + total

    return jax.grad(loss)(x)


def grad_through_while_free_loop(x):
    """grad of a fori_loop with static bounds (a scan) carrying a pytree."""

    def loss(x):
        def body(i, carry):
            a, b = carry
            return jnp.sin(a) * b, b + a * 0.1

        a, b = lax.fori_loop(0, 4, body, (x, jnp.ones_like(x)))
        return jnp.sum(a * b)

    return jax.grad(loss)(x)


# ---------------------------------------------------------------------------------------------
# Call-like primitives: jit, checkpoint, custom derivatives
# ---------------------------------------------------------------------------------------------


@jax.jit
def _inner(a, b):
    return jnp.tanh(a @ b) + 1.0


def inner_jit(x, w):
    """Nested jax.jit calls (also one with a static argument)."""
    g = jax.jit(lambda v, power: v**power, static_argnums=1)
    return g(_inner(x, w), 3) + _inner(x, w).sum()


def _inner_jit_args():
    rng = _rng(13)
    return _normal(rng, 3, 4), _normal(rng, 4, 5)


def _remat_block(w, x):
    return jnp.sin(jnp.tanh(x @ w) @ w.T)


def checkpoint_grad(w, x):
    """jax.checkpoint inside jax.grad: the backward pass recomputes the block."""
    block = jax.checkpoint(_remat_block)
    return jax.grad(lambda w: jnp.sum(block(w, block(w, x))))(w)


def checkpoint_policy_grad(w, x):
    """jax.checkpoint with a policy that saves matmul results."""
    block = jax.checkpoint(_remat_block, policy=jax.checkpoint_policies.dots_with_no_batch_dims_saveable)
    return jax.value_and_grad(lambda w: jnp.sum(block(w, x) ** 2))(w)


def checkpoint_forward(w, x):
    """jax.checkpoint without differentiation: a `checkpoint` equation in the forward jaxpr."""
    return jax.checkpoint(_remat_block, prevent_cse=False)(w, x)


def _checkpoint_args():
    rng = _rng(14)
    return _normal(rng, 4, 4, scale=0.5), _normal(rng, 3, 4)


def nn_relu_gelu(x):
    """jax.nn.relu (a custom_jvp) and gelu, forward and through jax.grad."""
    forward = jax.nn.relu(x) + jax.nn.gelu(x) + jax.nn.gelu(x, approximate=False) + jax.nn.silu(x)
    grad = jax.grad(lambda v: jnp.sum(jax.nn.relu(v) * jax.nn.gelu(v)))(x)
    return forward, grad


@jax.custom_jvp
def soft_clip(x):
    return jnp.tanh(x) * 3.0


@soft_clip.defjvp
def _soft_clip_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = soft_clip(x)
    return y, t * 3.0 * (1 - jnp.tanh(x) ** 2) * 0.5  # deliberately not the true derivative


def user_custom_jvp(x):
    return soft_clip(x), jax.grad(lambda v: jnp.sum(soft_clip(v) ** 2))(x)


@jax.custom_vjp
def clip_gradient(x, bound):
    return jnp.sin(x)


def _clip_gradient_fwd(x, bound):
    return jnp.sin(x), (jnp.cos(x), bound)


def _clip_gradient_bwd(residuals, g):
    cos, bound = residuals
    return jnp.clip(g * cos, -bound, bound), jnp.zeros_like(bound)


clip_gradient.defvjp(_clip_gradient_fwd, _clip_gradient_bwd)


def user_custom_vjp(x, bound):
    forward = clip_gradient(x, bound)
    grad = jax.grad(lambda v: jnp.sum(clip_gradient(v, bound) * 10.0 * v))(x)
    return forward, grad


def _custom_args():
    return (_normal(_rng(15), 6, scale=2.0),)


def _custom_vjp_args():
    return _normal(_rng(16), 6, scale=2.0), jnp.float32(0.5)


def vmapped(ws, xs):
    """vmap over a per-example function with a matmul, a reduction and a cond (which becomes select)."""

    def per_example(w, x):
        y = w @ x
        return lax.cond(y.sum() > 0, lambda v: v / jnp.linalg.norm(v), lambda v: -v, y)

    return jax.vmap(per_example)(ws, xs), jax.vmap(jnp.outer, in_axes=(0, None))(xs, xs[0])


def _vmap_args():
    rng = _rng(17)
    return _normal(rng, 4, 3, 5), _normal(rng, 4, 5)


# ---------------------------------------------------------------------------------------------
# Dtypes
# ---------------------------------------------------------------------------------------------


def integer_math(a, b, s):
    """int32 and uint32 arithmetic: floor division and remainder of negatives, shifts, bit ops."""
    u = a.astype(jnp.uint32)
    return (
        a // b,
        a % b,
        lax.div(a, b),
        lax.rem(a, b),
        a << s,
        a >> s,
        lax.shift_right_logical(a, s),
        (a & b) | (~a ^ b),
        jnp.abs(a) + jnp.sign(b) * jnp.minimum(a, b) - jnp.maximum(a, b),
        lax.population_count(a) + lax.clz(a),
        (u * jnp.uint32(2654435761)) >> jnp.uint32(7),
        jnp.sum(a * b),
        a**2,
    )


def _integer_args():
    rng = _rng(18)
    b = _ints(rng, 1, 9, 12) * jnp.where(_ints(rng, 0, 2, 12) == 1, 1, -1)
    return _ints(rng, -1000, 1000, 12), b, _ints(rng, 0, 31, 12)


def bool_math(x, y, mask):
    """Logical ops on bools, comparisons and where."""
    p = x > y
    q = jnp.logical_xor(p, mask)
    r = jnp.logical_and(q, ~mask) | jnp.logical_not(p)
    return (
        jnp.where(r, x, y),
        q,
        jnp.any(r, axis=0),
        jnp.all(q),
        r.astype(jnp.int32).sum(),
        p == mask,
        jnp.where(mask, 1.0, 0.0),
    )


def _bool_args():
    rng = _rng(19)
    return _normal(rng, 4, 5), _normal(rng, 4, 5), jnp.asarray(rng.integers(0, 2, (4, 5)).astype(bool))


def bf16_math(x, w):
    """bfloat16 throughout, with one reduction accumulated in float32.

    Every output is bf16: XLA keeps fused bf16 intermediates in f32 (excess precision), so a
    float32 output computed from bf16 values differs from op-by-op rounding by ~1 bf16 ulp.
    """
    h = jnp.tanh(x @ w) * jnp.bfloat16(0.5) + x[:, :4]
    return h, jnp.sum(h.astype(jnp.float32)).astype(jnp.bfloat16), jnp.exp(h).mean(axis=0)


def _bf16_args():
    rng = _rng(20)
    return _normal(rng, 3, 6, dtype=jnp.bfloat16), _normal(rng, 6, 4, scale=0.4, dtype=jnp.bfloat16)


def float16_math(x, y):
    z = x * y + jnp.float16(1.5)
    return jnp.sqrt(jnp.abs(z)), z.max(), (z / (jnp.abs(y) + 1)).astype(jnp.float32)


def _float16_args():
    rng = _rng(21)
    return _normal(rng, 8, dtype=jnp.float16), _normal(rng, 8, dtype=jnp.float16)


def int8_math(a, b):
    """int8 wrap-around, widening and narrowing conversions, and an int8 -> int32 dot."""
    wrapped = a + b
    product = a * b
    wide = a.astype(jnp.int32) * b.astype(jnp.int32)
    dot = lax.dot(a.reshape(2, 4), b.reshape(4, 2), preferred_element_type=jnp.int32)
    return wrapped, product, wide, dot, (a >> 2) & jnp.int8(0x0F), jnp.clip(a, -10, 10).astype(jnp.uint8)


def _int8_args():
    rng = _rng(22)
    return _ints(rng, -128, 128, 8, dtype=jnp.int8), _ints(rng, -128, 128, 8, dtype=jnp.int8)


def sub_byte_math(a, b):
    """int4 and uint4 values: 4-bit storage, widened for arithmetic, reshaped as views."""
    wide = a.astype(jnp.int8) * 3 + b.astype(jnp.int8)
    return a.reshape(2, 4), (a + a).reshape(4, 2), wide, b.astype(jnp.uint8) >> 1


def _sub_byte_args():
    rng = _rng(23)
    return _ints(rng, -8, 8, 8, dtype=jnp.int4), _ints(rng, 0, 16, 8, dtype=jnp.uint4)


# ---------------------------------------------------------------------------------------------
# Randomness
# ---------------------------------------------------------------------------------------------


def random_from_seed(seed, x):
    """A new-style key made inside the function from an integer seed argument."""
    key = jax.random.key(seed)
    k1, k2, k3 = jax.random.split(key, 3)
    noise = jax.random.normal(k1, x.shape)
    keep = jax.random.bernoulli(k2, 0.7, x.shape)
    return jnp.where(keep, x + noise, 0.0), jax.random.randint(k3, (4,), 0, 10)


def _random_seed_args():
    return jnp.int32(42), _normal(_rng(23), 3, 4)


def random_key_arg(key, x):
    """A new-style typed key array as argument; returns a key too."""
    key, sub = jax.random.split(key)
    sub = jax.random.fold_in(sub, 7)
    return key, jax.random.uniform(sub, x.shape) * x, jax.random.permutation(sub, x.shape[0])


def _random_key_args():
    return jax.random.key(3), _normal(_rng(24), 5)


def random_raw_key_arg(key, x):
    """A raw uint32[2] PRNGKey as argument; its splits stay raw uint32."""
    keys = jax.random.split(key, 3)
    return keys, jax.random.normal(keys[0], x.shape) + x, jax.random.choice(keys[1], x)


def _random_raw_key_args():
    return jax.random.PRNGKey(5), _normal(_rng(25), 5)


def random_in_scan(key, xs):
    """Keys as scan xs and ys: per-step keys split inside the loop."""

    def step(carry, inputs):
        k, x = inputs
        k1, k2 = jax.random.split(k)
        return carry + jax.random.normal(k1, x.shape) * x, k2

    return lax.scan(step, jnp.zeros(xs.shape[1:]), (jax.random.split(key, xs.shape[0]), xs))


def _random_in_scan_args():
    return jax.random.key(11), _normal(_rng(26), 4, 3)


# ---------------------------------------------------------------------------------------------
# Pytrees, constants, literals, unused outputs
# ---------------------------------------------------------------------------------------------


def pytrees(inputs, pair):
    """Nested dicts, tuples and lists in and out (and a None leaf out)."""
    a, (b, c) = inputs["a"], inputs["bc"]
    first, rest = pair
    return {
        "sum": a + b,
        "nested": {"list": [c * 2, first @ rest[0]], "tuple": (rest[1].T, None)},
        "scalar": jnp.sum(c),
    }


def _pytree_args():
    rng = _rng(27)
    return (
        {"a": _normal(rng, 3), "bc": (_normal(rng, 3), _normal(rng, 2, 2))},
        (_normal(rng, 2, 3), [_normal(rng, 3, 2), _normal(rng, 4, 2)]),
    )


_SMALL_CONST = np.asarray([0.5, -1.0, 2.0], np.float32)
_JAX_CONST = jnp.linspace(0.0, 1.0, 3)


def closed_over_constants(x):
    """Small closed-over numpy and jax arrays."""
    return x * _SMALL_CONST + _JAX_CONST, jnp.dot(x, _SMALL_CONST)


def _closed_args():
    return (_normal(_rng(28), 4, 3),)


LARGE_CONST = np.random.default_rng(1234).standard_normal((128, 64)).astype(np.float32)
LARGE_JAX_CONST = jnp.asarray(np.random.default_rng(4321).standard_normal((64, 128)).astype(np.float32))


def large_closed_constant(x):
    """Two 32 KiB closed-over constants (numpy and jax): they must stay out of the IR text."""
    return jnp.tanh(x @ LARGE_CONST) @ LARGE_JAX_CONST


def _large_const_args():
    return (_normal(_rng(29), 2, 128, scale=0.1),)


def weak_types(x, scale, offset, flag):
    """Python scalars as arguments (weak types) mixed with literals of every kind."""
    y = x * scale + offset
    z = jnp.where(flag, y, -y) * 2 + 1
    return z, z.astype(jnp.float16) * 0.5, jnp.arange(3) * offset + 1


def _weak_args():
    return _normal(_rng(30), 4, dtype=jnp.float16), 2.5, 3, True


def unused_outputs(x, w):
    """DropVars: a loss dropped from value_and_grad, a dropped carry, half a top_k."""
    _, grad = jax.value_and_grad(lambda w: jnp.sum(jnp.tanh(x @ w)))(w)
    _, ys = lax.scan(lambda c, r: (c + r, r * c), jnp.zeros(x.shape[1]), x)
    _, indices = lax.top_k(x[0], 2)
    return grad, ys, indices


def _unused_args():
    rng = _rng(31)
    return _normal(rng, 3, 4), _normal(rng, 4, 2)


# ---------------------------------------------------------------------------------------------
# Opaque higher-order primitives (bound whole, not inlined)
# ---------------------------------------------------------------------------------------------


def custom_reduce(x):
    """lax.reduce with computations JAX does not recognise: `reduce` primitives carrying a jaxpr."""
    row_max = lax.reduce(x, np.float32(0), lambda a, b: jnp.maximum(a, b) + 0.0 * a, (1,))

    def max_and_sum(a, b):
        return jnp.maximum(a[0], b[0]), a[1] + b[1]

    pair = lax.reduce((x, jnp.abs(x)), (np.float32(-np.inf), np.float32(0)), max_and_sum, (0,))
    return row_max, pair


def _custom_reduce_args():
    return (_normal(_rng(32), 3, 5),)


def sort_and_windows(x, y):
    """Multi-operand sort, reduce_window (max pooling and a sum window), cummax."""
    keys, values = lax.sort((x, y), num_keys=1)
    pooled = lax.reduce_window(x.reshape(1, 12), -jnp.inf, lax.max, (1, 3), (1, 2), "SAME")
    windowed = lax.reduce_window(y.reshape(3, 4), 0.0, lax.add, (2, 2), (1, 1), "VALID")
    return keys, values, pooled, windowed, lax.cummax(x)


def _sort_args():
    rng = _rng(33)
    return _normal(rng, 12), _normal(rng, 12)


def host_callback(x):
    """jax.pure_callback: a host function the interpreter calls as one opaque primitive."""
    out = jax.pure_callback(lambda a: np.sin(a) * 2, jax.ShapeDtypeStruct(x.shape, x.dtype), x)
    return out + x


def _callback_args():
    return (_normal(_rng(34), 5),)


def linear_solve(a, b):
    """lax.custom_linear_solve: a higher-order primitive carrying four jaxprs."""

    def matvec(v):
        return a @ v

    def solve(_, rhs):
        return jnp.linalg.solve(a, rhs)

    return lax.custom_linear_solve(matvec, b, solve, symmetric=False)


def _linear_solve_args():
    rng = _rng(35)
    return _normal(rng, 3, 3) + 3 * jnp.eye(3), _normal(rng, 3)


# ---------------------------------------------------------------------------------------------
# Array ops
# ---------------------------------------------------------------------------------------------


def cumulative(x):
    return jnp.cumsum(x, axis=0), jnp.cumprod(1 + 0.1 * x, axis=1), lax.cumlogsumexp(x, axis=1, reverse=True)


def _cumulative_args():
    return (_normal(_rng(36), 4, 5),)


def argmax_top_k(x):
    values, indices = lax.top_k(x, 3)
    return jnp.argmax(x, axis=1), jnp.argmin(x, axis=0), values, indices, jnp.sort(x, axis=0)


def _argmax_args():
    return (_normal(_rng(37), 4, 6),)


def gather_scatter(x, idx, updates):
    """Gathers, scatter-add with duplicate indices, set/max/min, take_along_axis, fill mode."""
    gathered = x[idx]
    added = x.at[idx].add(updates)
    unique = jnp.asarray([3, 0, 5], jnp.int32)
    setted = x.at[unique].set(updates[:3])
    maxed = x.at[unique, 1].max(10.0)
    along = jnp.take_along_axis(x, jnp.argsort(x, axis=1), axis=1)
    filled = x.at[idx + 4].get(mode="fill", fill_value=-1.0)
    return gathered, added, setted, maxed, along, filled


def _gather_args():
    rng = _rng(38)
    return _normal(rng, 6, 3), jnp.asarray([1, 4, 1, 5], jnp.int32), _normal(rng, 4, 3)


def dynamic_slicing(x, i, j, update):
    """dynamic_slice / dynamic_update_slice with traced starts (out-of-range starts are clamped)."""
    window = lax.dynamic_slice(x, (i, j), (2, 3))
    clamped = lax.dynamic_slice(x, (i + 10, j - 10), (2, 3))
    updated = lax.dynamic_update_slice(x, update, (j, i))
    row = lax.dynamic_index_in_dim(x, i, axis=0, keepdims=False)
    return window, clamped, updated, row


def _dynamic_args():
    rng = _rng(39)
    return _normal(rng, 5, 6), jnp.int32(2), jnp.int32(1), _normal(rng, 2, 3)


def shape_ops(x, y):
    """Transposes, reshapes, broadcasts, squeeze/expand_dims, rev, slices, iota."""
    t = jnp.transpose(x, (2, 0, 1))
    r = t.reshape(4, -1)
    b = jnp.broadcast_to(y[:, None, :], (3, 2, 4))
    e = jnp.expand_dims(jnp.squeeze(x[:1]), 0)
    return r, b + x.sum(), e, lax.rev(x, (0, 2)), x[:, ::2, 1:3], jnp.tile(y, (2, 1)), lax.iota(jnp.int32, 5)


def _shape_args():
    rng = _rng(40)
    return _normal(rng, 3, 2, 4), _normal(rng, 3, 4)


def concat_pad(x, y):
    """concatenate and pad (edge, interior and negative padding)."""
    cat = jnp.concatenate([x, y, x * 2], axis=0)
    stacked = jnp.stack([x, y], axis=1)
    padded = lax.pad(x, np.float32(-1), ((1, 2, 0), (0, -1, 1)))
    return cat, stacked, padded, jnp.pad(y, ((1, 1), (2, 0)), mode="reflect")


def _concat_args():
    rng = _rng(41)
    return _normal(rng, 2, 4), _normal(rng, 2, 4)


def elementwise_chain(x):
    """A long elementwise chain (the live-bytes test runs a 1 MiB version of it)."""
    for i in range(50):
        x = x * 0.999 + np.float32(0.001 * (i % 7))
        x = jnp.sin(x) if i % 3 == 0 else x
    return x


def _chain_args():
    return (_normal(_rng(42), 16, 16),)


def misc_math(x):
    """Transcendentals and special functions (each its own primitive)."""
    return (
        jax.scipy.special.logsumexp(x, axis=1),
        jax.nn.sigmoid(x) * jax.scipy.special.erf(x),
        jnp.expm1(x) + jnp.log1p(jnp.abs(x)) + jnp.arctan2(x, 1.5),
        lax.integer_pow(x, 3) + jnp.floor(x) + jnp.round(x) + lax.reduce_precision(x, 5, 10),
        jnp.linalg.norm(x, axis=0),
    )


def _misc_args():
    return (_normal(_rng(43), 3, 4),)


def lax_map_and_associative_scan(xs):
    """lax.map (a scan over rows) and associative_scan (unrolled slices and pads)."""
    mapped = lax.map(lambda row: jnp.sort(row)[::-1] * row.sum(), xs)
    return mapped, lax.associative_scan(jnp.add, xs, axis=0)


def _lax_map_args():
    return (_normal(_rng(44), 5, 4),)


PROGRAMS: tuple[Program, ...] = (
    Program("mlp", mlp, _mlp_forward_args),
    Program("mlp_grad", mlp_grad, _mlp_args),
    Program("mlp_train_step", mlp_train_step, _mlp_args),
    Program("convnet", convnet, _convnet_forward_args),
    Program("convnet_grad", convnet_grad, _convnet_args),
    Program("convnet_train_step", convnet_train_step, _convnet_args),
    Program("pooled_cnn", pooled_cnn, lambda: _pooled_cnn_args()[:2]),
    Program("pooled_cnn_train_step", pooled_cnn_train_step, _pooled_cnn_args),
    Program("attention", attention, _attention_forward_args),
    Program("attention_grad", attention_grad, _attention_args),
    Program("attention_train_step", attention_train_step, _attention_args),
    Program("layernorm", layernorm, _layernorm_forward_args),
    Program("layernorm_grad", layernorm_grad, _layernorm_args),
    Program("layernorm_train_step", layernorm_train_step, _layernorm_args),
    Program("scan_rnn", scan_rnn, _scan_args),
    Program("scan_reverse", scan_reverse, lambda: (_scan_args()[2],)),
    Program("scan_zero_length_xs", scan_zero_length_xs, _scan_zero_length_xs_args),
    Program("scan_zero_length_no_xs", scan_zero_length_no_xs, lambda: (jnp.arange(3, dtype=jnp.float32),)),
    Program("scan_multi", scan_multi, _scan_multi_args),
    Program("scan_unrolled_pytree", scan_unrolled_pytree, _scan_unrolled_args),
    Program("newton_sqrt", newton_sqrt, _newton_args),
    Program("fori_loop_static", fori_loop_static, _fori_args),
    Program("fori_loop_dynamic", fori_loop_dynamic, _fori_dynamic_args),
    Program("cond_bool", cond_bool, _cond_args),
    Program("switch", switch3, _switch_args),
    Program("switch_out_of_range", switch3, _switch_out_of_range_args),
    Program("nested_while_cond_scan", nested_while_cond_scan, _nested_args),
    Program("nested_scan_while_switch", nested_scan_while_switch, _nested_scan_args),
    Program("grad_through_scan", grad_through_scan, _scan_args),
    Program("grad_through_cond", grad_through_cond, _cond_args),
    Program("grad_through_fori_loop", grad_through_while_free_loop, _fori_args),
    Program("inner_jit", inner_jit, _inner_jit_args),
    Program("checkpoint_grad", checkpoint_grad, _checkpoint_args),
    Program("checkpoint_policy_grad", checkpoint_policy_grad, _checkpoint_args),
    Program("checkpoint_forward", checkpoint_forward, _checkpoint_args),
    Program("nn_relu_gelu", nn_relu_gelu, _custom_args),
    Program("user_custom_jvp", user_custom_jvp, _custom_args),
    Program("user_custom_vjp", user_custom_vjp, _custom_vjp_args),
    Program("vmap", vmapped, _vmap_args),
    Program("integer_math", integer_math, _integer_args),
    Program("bool_math", bool_math, _bool_args),
    Program("bf16_math", bf16_math, _bf16_args),
    Program("float16_math", float16_math, _float16_args),
    Program("int8_math", int8_math, _int8_args),
    Program("sub_byte_math", sub_byte_math, _sub_byte_args),
    Program("random_from_seed", random_from_seed, _random_seed_args),
    Program("random_key_arg", random_key_arg, _random_key_args),
    Program("random_raw_key_arg", random_raw_key_arg, _random_raw_key_args),
    Program("random_in_scan", random_in_scan, _random_in_scan_args),
    Program("pytrees", pytrees, _pytree_args),
    Program("closed_over_constants", closed_over_constants, _closed_args),
    Program("large_closed_constant", large_closed_constant, _large_const_args),
    Program("weak_types", weak_types, _weak_args),
    Program("unused_outputs", unused_outputs, _unused_args),
    Program("custom_reduce", custom_reduce, _custom_reduce_args),
    Program("sort_and_windows", sort_and_windows, _sort_args),
    Program("host_callback", host_callback, _callback_args),
    Program("linear_solve", linear_solve, _linear_solve_args),
    Program("cumulative", cumulative, _cumulative_args),
    Program("argmax_top_k", argmax_top_k, _argmax_args),
    Program("gather_scatter", gather_scatter, _gather_args),
    Program("dynamic_slicing", dynamic_slicing, _dynamic_args),
    Program("shape_ops", shape_ops, _shape_args),
    Program("concat_pad", concat_pad, _concat_args),
    Program("elementwise_chain", elementwise_chain, _chain_args),
    Program("misc_math", misc_math, _misc_args),
    Program("lax_map_and_associative_scan", lax_map_and_associative_scan, _lax_map_args),
)

BY_NAME: dict[str, Program] = {program.name: program for program in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

__all__ = ["BY_NAME", "PROGRAMS", "Program"]
