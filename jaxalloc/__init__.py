"""jaxalloc: static buffer assignment for JAX programs with the NNC allocator, on xDSL."""

from jaxalloc.api import Planned, RunStats, planned
from jaxalloc.errors import JaxallocError, TraceFormatError, UnsupportedProgramError

__all__ = ["JaxallocError", "Planned", "RunStats", "TraceFormatError", "UnsupportedProgramError", "planned"]
