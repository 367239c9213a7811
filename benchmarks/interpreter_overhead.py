"""Per-op cost of jaxalloc's eager interpreter against `jax.core.eval_jaxpr`.

Both run the same jaxpr op by op through `Primitive.bind`; the difference is the
interpreter's own overhead (xDSL dispatch, liveness bookkeeping). Prints a table.

    python benchmarks/interpreter_overhead.py [--repeats N]
"""

from __future__ import annotations

import argparse
import time

import jax

import jaxalloc
from models import elementwise_chain, elementwise_chain_args, transformer_layer, transformer_layer_args


def cases():
    return [
        ("1,000-op chain", elementwise_chain, elementwise_chain_args()),
        ("transformer layer", transformer_layer, transformer_layer_args()),
    ]


def best_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return min(times)


def measure(name, fn, args, repeats: int) -> tuple:
    closed = jax.make_jaxpr(fn)(*args)
    ops = len(closed.jaxpr.eqns)
    planned = jaxalloc.planned(fn, mode="eager")
    reference = best_time(lambda: jax.core.eval_jaxpr(closed.jaxpr, closed.consts, *args), repeats)
    eager = best_time(lambda: planned(*args), repeats)
    interpreted = planned.last_run.ops
    return name, ops, interpreted, reference / ops * 1e6, eager / ops * 1e6, eager / reference


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    repeats = parser.parse_args().repeats
    rows = [measure(name, fn, args, repeats) for name, fn, args in cases()]
    print("per-op times are per jaxpr equation; jx ops also count literals (jx.const) and loop rounds")
    print(f"{'program':<20} {'jaxpr eqns':>10} {'jx ops':>7} {'eval_jaxpr us/op':>17} {'eager us/op':>12} {'eager/eval_jaxpr':>17}")
    for name, ops, interpreted, ref, eager, ratio in rows:
        print(f"{name:<20} {ops:>10} {interpreted:>7} {ref:>17.1f} {eager:>12.1f} {ratio:>16.2f}x")


if __name__ == "__main__":
    main()
