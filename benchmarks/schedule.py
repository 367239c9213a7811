"""What `jx-schedule` gains: the max-live bound of each candidate order, and of the order it keeps.

Per program (the programs of `xla_compare.py`: the realistic programs of `programs.py` and the
library programs of `library_models.py`), after `jx-dce` alone and after `jx-dce,jx-canonicalize,
jx-fuse`: the bound (outputs inside the arena, 64 B alignment) of the traced order and of each
candidate order applied to every block, the bound of the order the pass keeps (the best candidate,
then a bounded search block by block) and the time the pass took. Prints Markdown tables.

    python benchmarks/schedule.py [--programs MLP,LSTM]
"""

from __future__ import annotations

import math
import time

from library_models import library_programs_list
from programs import chosen_programs

from jaxalloc import planned
from jaxalloc.passes.schedule import ORDERS, schedule

PIPELINES = (("jx-dce",), ("jx-dce", "jx-canonicalize", "jx-fuse"))


def main() -> None:
    chosen, _ = chosen_programs(__doc__.splitlines()[0], more=library_programs_list)
    for passes in PIPELINES:
        print(f"\nAfter {', '.join(passes)} (KiB):\n")
        header = ["program", *ORDERS, "kept", "kept / traced", "seconds"]
        print("| " + " | ".join(header) + " |")
        print("|" + "|".join([" --- "] + [" ---: "] * (len(header) - 1)) + "|")
        gains = []
        for name, fn, args in chosen:
            module = planned(fn, passes=passes).lower(*args)
            began = time.perf_counter()
            bounds = schedule(module)
            seconds = time.perf_counter() - began
            gains.append(bounds["best"] / bounds["traced"])
            cells = [name, *(f"{bounds[o] / 1024:,.2f}" for o in ORDERS), f"{bounds['best'] / 1024:,.2f}", f"{gains[-1]:.3f}", f"{seconds:.2f}"]
            print("| " + " | ".join(cells) + " |", flush=True)
        print(f"\nkept / traced: geometric mean {math.prod(gains) ** (1 / len(gains)):.3f}, least {min(gains):.3f}")


if __name__ == "__main__":
    main()
