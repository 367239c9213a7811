"""Frontend: a traced jaxpr converted into the jx dialect, with the JAX array types of its values."""
