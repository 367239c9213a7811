"""Test support, for the suite, the benchmarks and users checking their own programs: the program
corpora (`corpus`, `library`), the seeded random program generator (`random_programs`), the
differential check against `jax.jit` (`differential`), JAX transformations of planned functions
(`transformations`) and corrupted plans (`mutations`). Needs the `dev` extras (pytest, and flax,
equinox, diffrax, optax and dm-haiku for `library`)."""
