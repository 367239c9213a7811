"""jaxalloc: static buffer assignment for JAX programs with the NNC allocator, on xDSL.

The names below load on first use, so that `xdsl-opt` runs jaxalloc's passes without importing
JAX, which takes seconds.
"""

import importlib

_HOMES = {
    "JaxallocError": "jaxalloc.errors",
    "Plan": "jaxalloc.planning.plan",
    "PlanViolation": "jaxalloc.errors",
    "Planned": "jaxalloc.api",
    "PlannedOptions": "jaxalloc.api",
    "RunStats": "jaxalloc.api",
    "TraceFormatError": "jaxalloc.errors",
    "UnsupportedProgramError": "jaxalloc.errors",
    "config": "jaxalloc.execution.compiled.cache",
    "planned": "jaxalloc.api",
    "plans": "jaxalloc.api",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'jaxalloc' has no attribute {name!r}")
    return getattr(importlib.import_module(_HOMES[name]), name)


def __dir__():
    return __all__
