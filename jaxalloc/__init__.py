"""jaxalloc: static buffer assignment for JAX programs with the NNC allocator."""
