"""Plans of loop programs against XLA's memory for the same programs.

Per program: the arena of `Planned.plan(include_outputs=True)` (every value and the outputs in the
arena) against XLA's `temp + output - alias` for `jax.jit` of the same function, compiled with CPU
matmul fusion off (every intermediate XLA keeps is then a buffer it counts). Loops are where a
planner can lose to XLA: a ring of slots where XLA updates one buffer in place, an inner loop's ring
held in every slot of an outer one. The programs are diffrax solves (a saved output updated each
step, an adaptive Tsit5 solve and its gradient), nested `fori_loop`s, scans (an LSTM, a GRU, a
transformer over its layers, flax nnx layers scanned over and its gradient) and an optimizer loop.

    python benchmarks/loop_plans.py [--programs euler,fori]
"""

from __future__ import annotations

import argparse
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import models
from jax import lax

from jaxalloc import planned
from jaxalloc.reports.text import format_size
from jaxalloc.testing import library
from jaxalloc.xla.memory import XlaComparison, xla_memory


def nested_fori_loops(x, w):
    """An outer loop of 8 rounds around an inner one of 4 that updates the carried matrix, and an
    accumulator: XLA keeps one buffer of each."""

    def outer(i, state):
        x, acc = state
        x = lax.fori_loop(0, 4, lambda j, x: jnp.tanh(x @ w) + x, x)
        return x, acc + x

    return lax.fori_loop(0, 8, outer, (x, jnp.zeros_like(x)))


def nested_fori_args():
    return jnp.eye(64) * 0.5, jnp.full((64, 64), 0.01)


def programs() -> list[tuple[str, Callable, tuple]]:
    chosen = [("diffrax Euler, SaveAt(ts)", "diffrax_euler_saveat_ts"), ("diffrax Tsit5 neural ODE", "diffrax_neural_ode"),
              ("its gradient (RecursiveCheckpointAdjoint)", "diffrax_neural_ode_grad"), ("diffrax Heun to t1", "diffrax_heun_t1"),
              ("equinox GRU scan", "eqx_gru_scan"), ("flax nnx LSTM", "nnx_lstm_rnn"),
              ("flax nnx scan over layers", "nnx_scan_over_layers"), ("its gradient", "nnx_scan_over_layers_grad"),
              ("optax AdamW loop", "optax_adamw_scheduled_loop")]
    table = [(title, library.BY_NAME[name].fn, library.BY_NAME[name].make_args()) for title, name in chosen]
    return [
        *table,
        ("nested fori_loops", nested_fori_loops, nested_fori_args()),
        ("LSTM (scan)", models.lstm, models.lstm_args()),
        ("transformer (scan over layers)", models.scanned_transformer, models.scanned_transformer_args()),
        ("LSTM train step", models.train_step(models.lstm_loss), models.lstm_train_args()),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--programs", help="comma-separated substrings of program names (default: all)")
    options = parser.parse_args()
    wanted = [w.strip().lower() for w in options.programs.split(",")] if options.programs else None
    start, ratios = time.perf_counter(), []
    print("| program | plan (outputs inside) | XLA temp + output - alias | plan / XLA |")
    print("| --- | ---: | ---: | ---: |")
    for title, fn, args in programs():
        if wanted and not any(w in title.lower() for w in wanted):
            continue
        plan = planned(fn).plan(*args, include_outputs=True)
        xla = XlaComparison.xla_bytes(xla_memory(jax.jit(fn), args, fusion=False))
        ratio = plan.arena_bytes / xla
        ratios.append(ratio)
        print(f"| {title} | {format_size(plan.arena_bytes)} | {format_size(xla)} | {ratio:.2f} |", flush=True)
    if ratios:
        mean = math.exp(sum(map(math.log, ratios)) / len(ratios))
        print(f"| geometric mean |  |  | {mean:.2f} |")
    print(f"\n({len(ratios)} programs in {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
