"""Test session set-up: on a GPU each pytest-xdist worker takes device memory as it needs it, so that
several workers share one device (JAX would otherwise claim most of it for the first)."""

import os

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
