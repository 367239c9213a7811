"""Donated parameters: the arena and XLA's memory for training steps, without and with donation.

For the MLP and LSTM training steps of `programs.py` (`(params, *batch) -> (loss, new params)`),
planned with the outputs inside the arena, without donation and with the parameters donated
(`planned(step, donate_argnums=0)`, every leaf of the pytree), and XLA's `memory_analysis()`
with matmul fusion off, compiled with the same donation (`Plan.compare_xla()`):

- without donation the caller holds the parameters beside the arena, so the memory beyond the
  other arguments is `arena + params` for jaxalloc and `temp + output - alias + params` for XLA;
- with donation the arena holds them, the new parameters computed into their bytes, and XLA's
  memory is `temp + output - alias + donated` (alias: the output bytes XLA put in donated buffers).

Each program is planned after `jx-dce` alone and after `jx-canonicalize` and
`jx-fuse` too, where an update `p - lr * g` is one op that runs in place.

    python benchmarks/donation.py
"""

from __future__ import annotations

import time

import jax
import models

from jaxalloc import planned
from jaxalloc.reports.text import format_size

ALIGNMENT = 64
PIPELINES = [("jx-dce", ("jx-dce",)), ("+ jx-canonicalize, jx-fuse", ("jx-dce", "jx-canonicalize", "jx-fuse"))]


def programs():
    step = models.train_step
    return [
        ("MLP train step", step(models.mlp_loss), models.mlp_train_args()),
        ("LSTM train step", step(models.lstm_loss), models.lstm_train_args()),
    ]


def measure(fn, args, passes) -> dict:
    """The arena (outputs inside, every plan checked) and XLA's fusion-off memory, without and with
    the parameters donated."""
    found = {"params": sum(leaf.nbytes for leaf in jax.tree.leaves(args[0]))}
    for label, options in (("kept", {}), ("donated", {"donate_argnums": 0})):
        plan = planned(fn, passes=passes, **options).plan(*args, alignment=ALIGNMENT, include_outputs=True)
        plan.check()
        comparison = plan.compare_xla()
        found[label] = (plan.arena_bytes, comparison.xla_bytes(comparison.baseline()), comparison.baseline())
    return found


def main() -> None:
    header = [
        "program", "passes", "params", "arena", "arena + params", "arena, params donated",
        "XLA off: temp + output - alias", "XLA off: + params", "XLA off, donated: temp + output - alias + donated",
        "XLA alias (donated)", "arena / XLA, donated",
    ]
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join([" --- "] * 2 + [" ---: "] * (len(header) - 2)) + "|")
    start = time.perf_counter()
    for name, fn, args in programs():
        for pipeline, passes in PIPELINES:
            r = measure(fn, args, passes)
            (kept, xla_kept, _), (donated, xla_donated, memory) = r["kept"], r["donated"]
            cells = [
                name, pipeline, format_size(r["params"]), format_size(kept), format_size(kept + r["params"]),
                format_size(donated), format_size(xla_kept), format_size(xla_kept + r["params"]),
                format_size(xla_donated), format_size(memory.alias_size_in_bytes), f"{donated / xla_donated:.2f}",
            ]
            print("| " + " | ".join(cells) + " |", flush=True)
    print()
    print(
        "Memory beyond the arguments not donated, outputs included (XLA: matmul fusion off). Without "
        "donation the caller's parameters sit beside the arena (`arena + params`); with it they are rows "
        "of the arena from the start to their last use, and the new parameters may take their bytes."
    )
    print(f"\n({len(programs())} programs in {time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
