"""Test session set-up.

- On a GPU each pytest-xdist worker takes device memory as it needs it, so that several workers
  share one device (JAX would otherwise claim most of it for the first).
- The workers of a session share JAX's persistent compilation cache, in a folder of the session's
  own that it removes at its end: the programs under test are made of the same few kernels, which
  each worker and test would otherwise compile again. A cache the environment names is used as is.
"""

import os
import shutil
import tempfile

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

_OWN_CACHE = "JAX_COMPILATION_CACHE_DIR" not in os.environ
if _OWN_CACHE:  # set before JAX is imported, here and in the workers, which inherit the environment
    os.environ["JAX_COMPILATION_CACHE_DIR"] = tempfile.mkdtemp(prefix="jaxalloc-tests-cache-")
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "0"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"


def pytest_unconfigure(config):
    if _OWN_CACHE and not hasattr(config, "workerinput"):  # the session's first process, not a worker
        shutil.rmtree(os.environ["JAX_COMPILATION_CACHE_DIR"], ignore_errors=True)
