"""The memory check of arena mode over the whole test corpus: what a run really takes.

For every corpus program, one arena run with memory sampling after every op: the peak bytes
in use (the device's count where `memory_stats()` reports one, else the bytes of all live jax
arrays) less those in use before the call, against arena + outputs + the largest op's
operands and results + the small values the plan leaves to XLA. Prints a Markdown table and the number of programs within the bound.

    python benchmarks/arena_memory.py
"""

from __future__ import annotations

import sys

import jax

from jaxalloc.testing.corpus import PROGRAMS
from jaxalloc.testing.differential import memory_figures


def main() -> int:
    print(f"device: {jax.devices()[0].device_kind} ({jax.default_backend()})\n")
    print("| program | arena (B) | outputs (B) | largest op (B) | small values (B) | allowed (B) | measured peak (B) | within |")
    print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |")
    within = 0
    for program in PROGRAMS:
        f = memory_figures(program.fn, *program.make_args())
        ok = f.measured <= f.allowed
        within += ok
        cells = [program.name, *(f"{v:,}" for v in (f.arena, f.outputs, f.largest_op, f.small, f.allowed, f.measured))]
        print("| " + " | ".join(cells) + f" | {'yes' if ok else 'NO'} |")
    print(f"\n{within} of {len(PROGRAMS)} programs within arena + outputs + largest op + small values")
    return 0 if within == len(PROGRAMS) else 1


if __name__ == "__main__":
    sys.exit(main())
