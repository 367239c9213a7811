"""The library corpus: JAX programs written the way users of flax, equinox, diffrax, optax and
dm-haiku write them, with each library's own layers, transforms and solvers.

`PROGRAMS` is the table, in the same form as `jaxalloc.testing.corpus.PROGRAMS`: each `Program` has a
unique `name`, the function `fn` (a plain function of arrays or pytrees of arrays; the static
parts of a model, such as an nnx graph definition, a haiku `Transformed` or equinox's non-array
fields, are closed over) and `make_args`, which builds deterministic example arguments from a
fixed PRNG seed. `BY_NAME` indexes the table, `LIBRARY` says which library each program exercises.

Every program is small (tensors of a few KiB, ODE solves of a few dozen steps at most): they run
op by op through the interpreter in several modes.

    from jaxalloc.testing.library import PROGRAMS, BY_NAME
    for program in PROGRAMS:
        out = program.fn(*program.make_args())
"""

from __future__ import annotations

import functools

import diffrax
import equinox as eqx
import flax.linen as nn
import haiku as hk
import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

from jaxalloc.testing.corpus import Program


def _key(seed: int) -> jax.Array:
    return jax.random.key(seed)


def _normal(seed: int, *shape: int, scale: float = 1.0) -> jax.Array:
    return jnp.asarray((scale * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32))


def _labels(seed: int, n: int, classes: int) -> jax.Array:
    return jnp.asarray(np.random.default_rng(seed).integers(0, classes, size=n), dtype=jnp.int32)


def _cross_entropy(logits, labels):
    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


# =============================================================================================
# flax.nnx
# =============================================================================================


class _NnxCNN(nnx.Module):
    """Conv -> BatchNorm -> relu -> Dropout -> Conv (strided) -> mean pool -> Linear, NHWC."""

    def __init__(self, rngs: nnx.Rngs):
        self.conv1 = nnx.Conv(3, 4, kernel_size=(3, 3), use_bias=False, rngs=rngs)  # batch norm follows
        self.bn = nnx.BatchNorm(4, rngs=rngs)
        self.dropout = nnx.Dropout(0.25)
        self.conv2 = nnx.Conv(4, 6, kernel_size=(3, 3), strides=(2, 2), rngs=rngs)
        self.head = nnx.Linear(6, 5, rngs=rngs)

    def __call__(self, x, rngs=None):
        h = nnx.relu(self.bn(self.conv1(x)))
        h = self.dropout(h, rngs=rngs)
        h = nnx.relu(self.conv2(h))
        return self.head(h.mean(axis=(1, 2)))


@functools.cache
def _nnx_cnn():
    model = _NnxCNN(nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    return nnx.split((model, optimizer))


def nnx_cnn_train_step(state, x, labels, dropout_key):
    """flax.nnx: one Adam training step (nnx.Optimizer) of a conv + batch norm + dropout net."""
    # copy=True: fresh Variables, so a call outside a transform leaves `state` as it was
    model, optimizer = nnx.merge(_nnx_cnn()[0], state, copy=True)
    model.train()

    def loss_fn(model):
        return _cross_entropy(model(x, rngs=dropout_key), labels)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss, nnx.state((model, optimizer))


def _nnx_cnn_train_args():
    return _nnx_cnn()[1], _normal(1, 2, 8, 8, 3), _labels(2, 2, 5), _key(3)


@functools.cache
def _nnx_cnn_eval_graph():
    return nnx.split(_NnxCNN(nnx.Rngs(0)))


def nnx_cnn_eval(state, x):
    """flax.nnx: the conv + batch norm + dropout net's eval forward (running stats, no dropout)."""
    model = nnx.merge(_nnx_cnn_eval_graph()[0], state)
    model.eval()
    return nnx.softmax(model(x))


def _nnx_cnn_eval_args():
    return _nnx_cnn_eval_graph()[1], _normal(4, 2, 8, 8, 3)


class _NnxAttentionBlock(nnx.Module):
    """Pre-norm causal self-attention block with an MLP."""

    def __init__(self, rngs: nnx.Rngs):
        self.norm1 = nnx.LayerNorm(16, rngs=rngs)
        self.attention = nnx.MultiHeadAttention(num_heads=2, in_features=16, decode=False, rngs=rngs)
        self.norm2 = nnx.LayerNorm(16, rngs=rngs)
        self.up = nnx.Linear(16, 32, rngs=rngs)
        self.down = nnx.Linear(32, 16, rngs=rngs)

    def __call__(self, x):
        mask = nnx.make_causal_mask(x[..., 0])
        x = x + self.attention(self.norm1(x), mask=mask, deterministic=True)
        return x + self.down(nnx.gelu(self.up(self.norm2(x))))


@functools.cache
def _nnx_attention():
    return nnx.split(_NnxAttentionBlock(nnx.Rngs(5)))


def nnx_attention(state, x):
    """flax.nnx: a causal nnx.MultiHeadAttention transformer block, forward."""
    return nnx.merge(_nnx_attention()[0], state)(x)


def _nnx_attention_args():
    return _nnx_attention()[1], _normal(6, 2, 6, 16)


@functools.cache
def _nnx_lstm():
    return nnx.split(nnx.RNN(nnx.LSTMCell(4, 8, rngs=nnx.Rngs(7)), return_carry=True))


def nnx_lstm_rnn(state, xs):
    """flax.nnx: nnx.RNN over an nnx.LSTMCell (nnx.scan inside), final carry and every output."""
    return nnx.merge(_nnx_lstm()[0], state)(xs)


def _nnx_lstm_args():
    return _nnx_lstm()[1], _normal(8, 2, 6, 4)


class _NnxResidualBlock(nnx.Module):
    def __init__(self, dim: int, rngs: nnx.Rngs):
        self.norm = nnx.LayerNorm(dim, rngs=rngs)
        self.linear = nnx.Linear(dim, dim, rngs=rngs)

    def __call__(self, x):
        return x + nnx.gelu(self.linear(self.norm(x)))


class _NnxScannedStack(nnx.Module):
    """Layers made by `nnx.vmap` (their parameters stacked) and run by `nnx.scan` over them, as the
    flax guide to scanning over layers writes it."""

    def __init__(self, dim: int, layers: int, rngs: nnx.Rngs):
        @nnx.split_rngs(splits=layers)
        @nnx.vmap(in_axes=(0,), out_axes=0)
        def make_layers(rngs):
            return _NnxResidualBlock(dim, rngs)

        self.layers = make_layers(rngs)

    def __call__(self, x):
        @nnx.scan(in_axes=(nnx.Carry, 0), out_axes=nnx.Carry)
        def forward(x, layer):
            return layer(x)

        return forward(x, self.layers)


@functools.cache
def _nnx_scanned_stack():
    return nnx.split(_NnxScannedStack(8, 3, nnx.Rngs(9)))


def nnx_scan_over_layers(state, x):
    """flax.nnx: residual layers stacked by nnx.vmap and run by nnx.scan over them, forward."""
    return nnx.merge(_nnx_scanned_stack()[0], state)(x)


def nnx_scan_over_layers_grad(state, x):
    """flax.nnx: the gradient of a loss of the layers scanned over, with respect to their parameters."""

    def loss_fn(state):
        return jnp.mean(nnx_scan_over_layers(state, x) ** 2)

    return jax.value_and_grad(loss_fn)(state)


def _nnx_scan_args():
    return _nnx_scanned_stack()[1], _normal(10, 4, 8)


# =============================================================================================
# flax.linen
# =============================================================================================


class _LinenCNN(nn.Module):
    """Conv -> BatchNorm -> relu -> Dropout -> Conv (strided) -> mean pool -> Dense, NHWC."""

    @nn.compact
    def __call__(self, x, train: bool):
        h = nn.Conv(4, (3, 3), use_bias=False)(x)  # batch norm follows
        h = nn.BatchNorm(use_running_average=not train, momentum=0.9)(h)
        h = nn.Dropout(0.25, deterministic=not train)(nn.relu(h))
        h = nn.relu(nn.Conv(6, (3, 3), strides=(2, 2))(h))
        return nn.Dense(5)(h.mean(axis=(1, 2)))


_LINEN_CNN = _LinenCNN()
_SGD_MOMENTUM = optax.sgd(0.05, momentum=0.9)


@functools.cache
def _linen_cnn_variables():
    return _LINEN_CNN.init(_key(20), jnp.zeros((2, 8, 8, 3)), train=False)


def linen_cnn_train_step(params, batch_stats, opt_state, x, labels, dropout_key):
    """flax.linen: an SGD-with-momentum step of a conv + batch norm + dropout net, mutable batch_stats."""

    def loss_fn(params):
        logits, updates = _LINEN_CNN.apply(
            {"params": params, "batch_stats": batch_stats},
            x,
            train=True,
            rngs={"dropout": dropout_key},
            mutable=["batch_stats"],
        )
        return _cross_entropy(logits, labels), updates["batch_stats"]

    (loss, batch_stats), grads = jax.value_and_grad(loss_fn, has_aux=True)(params)
    updates, opt_state = _SGD_MOMENTUM.update(grads, opt_state, params)
    return loss, optax.apply_updates(params, updates), batch_stats, opt_state


def _linen_cnn_train_args():
    variables = _linen_cnn_variables()
    params, batch_stats = variables["params"], variables["batch_stats"]
    x, labels = _normal(21, 2, 8, 8, 3), _labels(22, 2, 5)
    return params, batch_stats, _SGD_MOMENTUM.init(params), x, labels, _key(23)


def linen_cnn_eval(variables, x):
    """flax.linen: the conv + batch norm + dropout net's eval forward (train=False)."""
    return nn.log_softmax(_LINEN_CNN.apply(variables, x, train=False))


def _linen_cnn_eval_args():
    return _linen_cnn_variables(), _normal(24, 2, 8, 8, 3)


class _LinenAttention(nn.Module):
    """Post-norm causal self-attention with nn.MultiHeadDotProductAttention."""

    @nn.compact
    def __call__(self, x):
        mask = nn.make_causal_mask(x[..., 0])
        h = nn.MultiHeadDotProductAttention(num_heads=2, qkv_features=16)(x, x, mask=mask)
        return nn.LayerNorm()(x + h)


_LINEN_ATTENTION = _LinenAttention()


def linen_attention(params, x):
    """flax.linen: causal nn.MultiHeadDotProductAttention + residual + LayerNorm, forward."""
    return _LINEN_ATTENTION.apply({"params": params}, x)


def _linen_attention_args():
    x = _normal(25, 2, 6, 16)
    return _LINEN_ATTENTION.init(_key(26), x)["params"], x


class _LinenGRUClassifier(nn.Module):
    """nn.RNN(nn.GRUCell) over a sequence (linen's lifted scan), then a Dense head on the last carry."""

    @nn.compact
    def __call__(self, xs):
        carry, _ = nn.RNN(nn.GRUCell(8), return_carry=True)(xs)
        return nn.Dense(3)(carry)


_LINEN_GRU = _LinenGRUClassifier()
_ADAMW = optax.adamw(1e-2, weight_decay=1e-3)


def linen_gru_train_step(params, opt_state, xs, labels):
    """flax.linen: an AdamW step of a GRU sequence classifier (nn.RNN, i.e. nn.scan)."""

    def loss_fn(params):
        return _cross_entropy(_LINEN_GRU.apply({"params": params}, xs), labels)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = _ADAMW.update(grads, opt_state, params)
    return loss, optax.apply_updates(params, updates), opt_state


def _linen_gru_args():
    xs = _normal(27, 2, 5, 4)
    params = _LINEN_GRU.init(_key(28), xs)["params"]
    return params, _ADAMW.init(params), xs, _labels(29, 2, 3)


# =============================================================================================
# dm-haiku
# =============================================================================================

_CLIP_ADAM = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-2))


def _haiku_mlp_fn(x):
    return hk.nets.MLP([16, 3], activation=jax.nn.gelu)(x)


_HAIKU_MLP = hk.without_apply_rng(hk.transform(_haiku_mlp_fn))


def haiku_mlp_train_step(params, opt_state, x, labels):
    """dm-haiku: hk.nets.MLP training step with optax.chain(clip_by_global_norm, adam)."""

    def loss_fn(params):
        return _cross_entropy(_HAIKU_MLP.apply(params, x), labels)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = _CLIP_ADAM.update(grads, opt_state, params)
    return loss, optax.apply_updates(params, updates), opt_state


def _haiku_mlp_args():
    x = _normal(40, 4, 6)
    params = _HAIKU_MLP.init(_key(41), x)
    return params, _CLIP_ADAM.init(params), x, _labels(42, 4, 3)


def _haiku_attention_fn(x):
    mask = jnp.tril(jnp.ones((x.shape[0], 1, x.shape[1], x.shape[1]), bool))
    h = hk.MultiHeadAttention(num_heads=2, key_size=8, w_init=hk.initializers.VarianceScaling(1.0))(x, x, x, mask=mask)
    return hk.LayerNorm(axis=-1, create_scale=True, create_offset=True)(x + h)


_HAIKU_ATTENTION = hk.transform(_haiku_attention_fn)


def haiku_attention(params, x):
    """dm-haiku: causal hk.MultiHeadAttention + residual + hk.LayerNorm (hk.transform, apply with params)."""
    return _HAIKU_ATTENTION.apply(params, None, x)


def _haiku_attention_args():
    x = _normal(43, 2, 6, 16)
    return _HAIKU_ATTENTION.init(_key(44), x), x


def _haiku_lstm_fn(xs):
    core = hk.LSTM(8)
    outputs, state = hk.dynamic_unroll(core, xs, core.initial_state(xs.shape[1]))
    return hk.Linear(2)(outputs), state


_HAIKU_LSTM = hk.without_apply_rng(hk.transform(_haiku_lstm_fn))


def haiku_lstm_grad(params, xs, ys):
    """dm-haiku: gradient of a loss through hk.LSTM unrolled by hk.dynamic_unroll (lax.scan), time-major."""

    def loss_fn(params):
        outputs, _ = _HAIKU_LSTM.apply(params, xs)
        return jnp.mean((outputs - ys) ** 2)

    return jax.grad(loss_fn)(params)


def _haiku_lstm_args():
    xs = _normal(45, 5, 2, 4)
    return _HAIKU_LSTM.init(_key(46), xs), xs, _normal(47, 5, 2, 2)


def _haiku_conv_bn_fn(x, is_training):
    h = hk.Conv2D(4, 3, with_bias=False)(x)  # batch norm follows
    h = hk.BatchNorm(create_scale=True, create_offset=True, decay_rate=0.9)(h, is_training=is_training)
    h = jax.nn.relu(h)
    if is_training:
        h = hk.dropout(hk.next_rng_key(), 0.25, h)
    return hk.Linear(5)(h.mean(axis=(1, 2)))


_HAIKU_CONV_BN = hk.transform_with_state(_haiku_conv_bn_fn)


def haiku_conv_bn_train(params, state, x, key):
    """dm-haiku: hk.transform_with_state conv + hk.BatchNorm + hk.dropout, training forward (new state)."""
    logits, state = _HAIKU_CONV_BN.apply(params, state, key, x, is_training=True)
    return jax.nn.softmax(logits), state


def _haiku_conv_bn_args():
    x = _normal(48, 2, 8, 8, 3)
    params, state = _HAIKU_CONV_BN.init(_key(49), x, is_training=True)
    return params, state, x, _key(50)


# =============================================================================================
# equinox
# =============================================================================================


@functools.cache
def _eqx_mlp():
    model = eqx.nn.MLP(6, 3, width_size=16, depth=2, activation=jax.nn.softplus, key=_key(60))
    return eqx.partition(model, eqx.is_array)


def eqx_mlp(params, x):
    """equinox: eqx.nn.MLP forward, jax.vmap over the batch."""
    model = eqx.combine(params, _eqx_mlp()[1])
    return jax.vmap(model)(x)


def _eqx_mlp_args():
    return _eqx_mlp()[0], _normal(61, 4, 6)


_EQX_ADAMW = optax.adamw(1e-2, weight_decay=1e-2)


def eqx_mlp_train_step(params, opt_state, x, y):
    """equinox: eqx.filter_value_and_grad + optax.adamw training step of an eqx.nn.MLP."""
    model = eqx.combine(params, _eqx_mlp()[1])

    @eqx.filter_value_and_grad
    def loss_fn(model):
        return jnp.mean((jax.vmap(model)(x) - y) ** 2)

    loss, grads = loss_fn(model)
    updates, opt_state = _EQX_ADAMW.update(grads, opt_state, eqx.filter(model, eqx.is_array))
    model = eqx.apply_updates(model, updates)
    return loss, eqx.filter(model, eqx.is_array), opt_state


def _eqx_mlp_train_args():
    params = _eqx_mlp()[0]
    return params, _EQX_ADAMW.init(params), _normal(62, 4, 6), _normal(63, 4, 3)


def eqx_error_if(a, b):
    """equinox: solve a small SPD system, guarded by eqx.error_if on a bad pivot and non-finite output."""
    a = eqx.error_if(a, jnp.any(jnp.diag(a) <= 0), "matrix has a non-positive diagonal")
    chol = jnp.linalg.cholesky(a)
    x = jax.scipy.linalg.cho_solve((chol, True), b)
    return eqx.error_if(x, ~jnp.all(jnp.isfinite(x)), "solution is not finite")


def _eqx_error_if_args():
    m = _normal(64, 6, 6)
    return m @ m.T + 6.0 * jnp.eye(6), _normal(65, 6, 2)


@functools.cache
def _eqx_gru():
    cell = eqx.nn.GRUCell(4, 8, key=_key(66))
    head = eqx.nn.Linear(8, 2, key=_key(67))
    return eqx.partition((cell, head), eqx.is_array)


def eqx_gru_scan(params, xs):
    """equinox: eqx.nn.GRUCell under jax.lax.scan, a Linear read-out of every hidden state."""
    cell, head = eqx.combine(params, _eqx_gru()[1])

    def step(h, x):
        h = cell(x, h)
        return h, head(h)

    return jax.lax.scan(step, jnp.zeros(cell.hidden_size), xs)


def _eqx_gru_args():
    return _eqx_gru()[0], _normal(68, 6, 4)


@functools.cache
def _eqx_attention():
    attention = eqx.nn.MultiheadAttention(num_heads=2, query_size=16, use_output_bias=True, key=_key(69))
    return eqx.partition((attention, eqx.nn.LayerNorm(16)), eqx.is_array)


def eqx_attention(params, x):
    """equinox: eqx.nn.MultiheadAttention with a causal mask + residual + eqx.nn.LayerNorm."""
    attention, norm = eqx.combine(params, _eqx_attention()[1])
    mask = jnp.tril(jnp.ones((x.shape[0], x.shape[0]), bool))
    return jax.vmap(norm)(x + attention(x, x, x, mask=mask))


def _eqx_attention_args():
    return _eqx_attention()[0], _normal(70, 6, 16)


# =============================================================================================
# diffrax
# =============================================================================================


@functools.cache
def _vector_field():
    mlp = eqx.nn.MLP(4, 4, width_size=8, depth=1, activation=jnp.tanh, key=_key(80))
    return eqx.partition(mlp, eqx.is_array)


def _neural_ode_term():
    static = _vector_field()[1]
    return diffrax.ODETerm(lambda t, y, params: eqx.combine(params, static)(y))


def _neural_ode_solve(params, y0):
    return diffrax.diffeqsolve(
        _neural_ode_term(),
        diffrax.Tsit5(),
        t0=0.0,
        t1=1.0,
        dt0=0.25,
        y0=y0,
        args=params,
        stepsize_controller=diffrax.PIDController(rtol=1e-3, atol=1e-5),
        max_steps=16,
    )


def diffrax_neural_ode(params, y0):
    """diffrax: a neural ODE (eqx.nn.MLP vector field) solved with Tsit5 and an adaptive PIDController."""
    solution = _neural_ode_solve(params, y0)
    return solution.ys, solution.stats["num_accepted_steps"]


def _neural_ode_args():
    return _vector_field()[0], _normal(81, 4)


def diffrax_neural_ode_grad(params, y0, target):
    """diffrax: gradient of the adaptive Tsit5 neural ODE through the default RecursiveCheckpointAdjoint."""

    def loss_fn(params):
        return jnp.sum((_neural_ode_solve(params, y0).ys[-1] - target) ** 2)

    return jax.value_and_grad(loss_fn)(params)


def _neural_ode_grad_args():
    return _vector_field()[0], _normal(82, 4), _normal(83, 4)


def _damped_oscillator(t, y, args):
    x, v = y
    omega, zeta = args
    return v, -(omega**2) * x - 2 * zeta * omega * v + jnp.sin(t)


def diffrax_euler_saveat_ts(y0, args):
    """diffrax: a forced damped oscillator (pytree state) by Euler, saved at given times (SaveAt(ts=...))."""
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(_damped_oscillator),
        diffrax.Euler(),
        t0=0.0,
        t1=2.0,
        dt0=0.25,
        y0=y0,
        args=args,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 2.0, 5)),
        max_steps=16,
    )
    return solution.ts, solution.ys


def _oscillator_args():
    return (_normal(84, 3), _normal(85, 3)), (jnp.float32(2.0), jnp.float32(0.3))


def diffrax_heun_t1(y0, k):
    """diffrax: a forced linear decay system dy/dt = -K y + cos(t) by Heun with a fixed step, SaveAt(t1=True)."""
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, k: -(k @ y) + jnp.cos(t)),
        diffrax.Heun(),
        t0=0.0,
        t1=1.0,
        dt0=0.2,
        y0=y0,
        args=k,
        saveat=diffrax.SaveAt(t1=True),
        max_steps=16,
    )
    return solution.ys[0]


def _heun_args():
    m = _normal(86, 4, 4, scale=0.5)
    return _normal(87, 4), m @ m.T + jnp.eye(4)


# =============================================================================================
# optax (on a plain-JAX model)
# =============================================================================================

_SCHEDULE = optax.warmup_cosine_decay_schedule(0.0, 0.05, warmup_steps=1, decay_steps=4)
_ADAMW_SCHEDULED = optax.adamw(_SCHEDULE, weight_decay=1e-3)


def _softmax_regression_loss(params, x, y):
    logits = x @ params["w"] + params["b"]
    return optax.softmax_cross_entropy(logits, jax.nn.one_hot(y, 3)).mean()


def optax_adamw_scheduled_loop(params, x, y):
    """optax: three AdamW steps with a warmup-cosine schedule under lax.fori_loop (carried opt state)."""

    def train_step(_, carry):
        params, opt_state, _ = carry
        loss, grads = jax.value_and_grad(_softmax_regression_loss)(params, x, y)
        updates, opt_state = _ADAMW_SCHEDULED.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    return jax.lax.fori_loop(0, 3, train_step, (params, _ADAMW_SCHEDULED.init(params), jnp.float32(0.0)))


def _optax_loop_args():
    params = {"w": _normal(90, 6, 3, scale=0.4), "b": jnp.zeros(3)}
    return params, _normal(92, 4, 6), _labels(93, 4, 3)


_SGD_NESTEROV = optax.sgd(0.1, momentum=0.9, nesterov=True)


def optax_sgd_momentum_step(params, opt_state, x, y):
    """optax: one Nesterov SGD-with-momentum step of a plain-JAX two-layer net, optax.l2_loss."""

    def loss_fn(params):
        prediction = jax.nn.relu(x @ params[0]) @ params[1]
        return optax.l2_loss(prediction, y).mean()

    loss, grads = jax.value_and_grad(loss_fn)(params)
    updates, opt_state = _SGD_NESTEROV.update(grads, opt_state, params)
    return loss, optax.apply_updates(params, updates), opt_state


def _optax_sgd_args():
    params = (_normal(94, 6, 8, scale=0.4), _normal(95, 8, 2, scale=0.4))
    return params, _SGD_NESTEROV.init(params), _normal(96, 4, 6), _normal(97, 4, 2)


# =============================================================================================
# The table
# =============================================================================================

_TABLE: tuple[tuple[str, str, object, object], ...] = (
    ("nnx_cnn_train_step", "flax.nnx", nnx_cnn_train_step, _nnx_cnn_train_args),
    ("nnx_cnn_eval", "flax.nnx", nnx_cnn_eval, _nnx_cnn_eval_args),
    ("nnx_attention", "flax.nnx", nnx_attention, _nnx_attention_args),
    ("nnx_lstm_rnn", "flax.nnx", nnx_lstm_rnn, _nnx_lstm_args),
    ("nnx_scan_over_layers", "flax.nnx", nnx_scan_over_layers, _nnx_scan_args),
    ("nnx_scan_over_layers_grad", "flax.nnx", nnx_scan_over_layers_grad, _nnx_scan_args),
    ("linen_cnn_train_step", "flax.linen", linen_cnn_train_step, _linen_cnn_train_args),
    ("linen_cnn_eval", "flax.linen", linen_cnn_eval, _linen_cnn_eval_args),
    ("linen_attention", "flax.linen", linen_attention, _linen_attention_args),
    ("linen_gru_train_step", "flax.linen", linen_gru_train_step, _linen_gru_args),
    ("haiku_mlp_train_step", "dm-haiku", haiku_mlp_train_step, _haiku_mlp_args),
    ("haiku_attention", "dm-haiku", haiku_attention, _haiku_attention_args),
    ("haiku_lstm_grad", "dm-haiku", haiku_lstm_grad, _haiku_lstm_args),
    ("haiku_conv_bn_train", "dm-haiku", haiku_conv_bn_train, _haiku_conv_bn_args),
    ("eqx_mlp", "equinox", eqx_mlp, _eqx_mlp_args),
    ("eqx_mlp_train_step", "equinox", eqx_mlp_train_step, _eqx_mlp_train_args),
    ("eqx_error_if", "equinox", eqx_error_if, _eqx_error_if_args),
    ("eqx_gru_scan", "equinox", eqx_gru_scan, _eqx_gru_args),
    ("eqx_attention", "equinox", eqx_attention, _eqx_attention_args),
    ("diffrax_neural_ode", "diffrax", diffrax_neural_ode, _neural_ode_args),
    ("diffrax_neural_ode_grad", "diffrax", diffrax_neural_ode_grad, _neural_ode_grad_args),
    ("diffrax_euler_saveat_ts", "diffrax", diffrax_euler_saveat_ts, _oscillator_args),
    ("diffrax_heun_t1", "diffrax", diffrax_heun_t1, _heun_args),
    ("optax_adamw_scheduled_loop", "optax", optax_adamw_scheduled_loop, _optax_loop_args),
    ("optax_sgd_momentum_step", "optax", optax_sgd_momentum_step, _optax_sgd_args),
)

PROGRAMS: tuple[Program, ...] = tuple(Program(name, fn, make_args) for name, _, fn, make_args in _TABLE)
LIBRARY: dict[str, str] = {name: library for name, library, _, _ in _TABLE}
BY_NAME: dict[str, Program] = {program.name: program for program in PROGRAMS}
assert len(BY_NAME) == len(PROGRAMS), "program names must be unique"

__all__ = ["BY_NAME", "LIBRARY", "PROGRAMS"]
