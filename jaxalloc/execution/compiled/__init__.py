"""The compiled arena executor (`planned(f, mode="compiled")`): a planned function as one jitted
kernel over an arena it makes itself (or one kept between calls). docs/design/compiled.md says how
the kernel is built and what keeps XLA from undoing the plan.

- `kinds`: what a value is while the kernel is traced (in the arena, an array, either).
- `offsets`: offsets and rounds, Python ints or traced int32 scalars; the `mem` dialect's multi-view
  rule evaluated on them (`TRACED`); windows of values.
- `guards`: the ops and limits that keep XLA from copying the arena.
- `traced_arena`: reads, writes and moves of values in the arena as the kernel is traced.
- `functions`: the jx ops traced over the arena (`CompiledFunctions`).
- `rewrite`: the kernel's jaxpr with its offsets made arguments (`offsets_as_arguments`).
- `run`: the kernel built, called and inspected (`CompiledRun`).
- `stored`: a kernel kept as its lowered StableHLO and called from it in a later process (`StoredKernel`).
- `cache`: the persistent kernel cache (`jaxalloc.config.update("jaxalloc_cache_dir", ...)`), keyed by
  the function's jaxpr and options.
"""

from jaxalloc.execution.compiled.functions import CompiledFunctions
from jaxalloc.execution.compiled.run import CompiledRun

__all__ = ["CompiledFunctions", "CompiledRun"]
