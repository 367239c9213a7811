"""jaxalloc: static buffer assignment for JAX programs with the NNC allocator, on xDSL."""

from jaxalloc.api import Planned, RunStats, planned
from jaxalloc.planning.plan import Plan
from jaxalloc.errors import JaxallocError, PlanViolation, TraceFormatError, UnsupportedProgramError

__all__ = ["JaxallocError", "Plan", "PlanViolation", "Planned", "RunStats", "TraceFormatError", "UnsupportedProgramError", "planned"]
