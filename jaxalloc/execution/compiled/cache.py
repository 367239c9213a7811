"""The persistent kernel cache: a compiled planned function's kernel kept on disk (`StoredKernel`), so
that a later process's first call traces the function, as `jax.jit`'s does, and finds its kernel
there: no conversion, passes, plan or kernel trace. Beside JAX's persistent compilation cache, which
then has the kernel's executable, it makes that first call about as fast as jit's.

Off by default; on, as JAX's own cache is, with a folder named in the environment or the config:

    JAXALLOC_CACHE_DIR=/path/to/cache python ...
    jaxalloc.config.update("jaxalloc_cache_dir", "/path/to/cache")

An entry is keyed by everything that makes the kernel: the function's jaxpr (its text, the values of
its constants and literals, the types of its inputs and outputs), the options that change the plan
or the kernel, jaxalloc's source, JAX's and jaxlib's versions, the backend and the device. An entry
that does not read back whole is ignored and written again.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import tempfile
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jaxlib
import numpy as np

from jaxalloc.errors import JaxallocError
from jaxalloc.execution.compiled.stored import StoredKernel

FORMAT = b"jaxalloc kernel 3\n"
"""The first line of every entry, and the start of every key: an entry in another format is not read
(3: whether the kernel holds its values in XLA's own buffers, `StoredKernel.xla_buffers`)."""

ENVIRONMENT = "JAXALLOC_CACHE_DIR"

FIELDS = ("arena_bytes", "word", "offsets", "status", "status_words", "donated", "makes_arena", "xla_buffers")
"""What an entry holds beside the module (`StoredKernel`'s fields)."""


class Config:
    """jaxalloc's settings, updated as `jax.config` is: `jaxalloc.config.update("jaxalloc_cache_dir",
    path)`; each starts from its environment variable (`JAXALLOC_CACHE_DIR`), as JAX's do."""

    def __init__(self) -> None:
        self.jaxalloc_cache_dir: str | None = os.environ.get(ENVIRONMENT) or None
        """The folder of the persistent kernel cache; None (the default) keeps it off."""

    def update(self, name: str, value: Any) -> None:
        if name != "jaxalloc_cache_dir":
            raise JaxallocError(f"unknown jaxalloc config option {name!r}; the options are 'jaxalloc_cache_dir'")
        if value is not None and not isinstance(value, (str, os.PathLike)):
            raise JaxallocError(f"jaxalloc_cache_dir must be a path or None, got {value!r}")
        self.jaxalloc_cache_dir = None if value is None else os.fspath(value) or None


config = Config()


def cache_dir() -> Path | None:
    """The cache's folder, None where it is off."""
    return None if config.jaxalloc_cache_dir is None else Path(config.jaxalloc_cache_dir)


def kernel_key(closed_jaxpr, options: dict[str, Any]) -> str | None:
    """The key of a function's kernel: its jaxpr and the options that change the plan or the kernel
    (`options`: plain values); None for a function whose kernel cannot be stored, one with effects
    or a host callback, which lives in the process that traced it."""
    if closed_jaxpr.effects or any("callback" in eqn.primitive.name for eqn in _equations(closed_jaxpr.jaxpr)):
        return None
    digest = hashlib.sha256(FORMAT)
    for part in (_environment(), json.dumps(options, sort_keys=True, default=repr), str(closed_jaxpr.jaxpr)):
        digest.update(part.encode())
        digest.update(b"\0")
    for avals in (closed_jaxpr.in_avals, closed_jaxpr.out_avals):
        digest.update(repr([(a.shape, str(a.dtype), a.weak_type) for a in avals]).encode())
    for value in _constants(closed_jaxpr):
        array = np.asarray(value)
        digest.update(f"{array.dtype}{array.shape}".encode())
        digest.update(np.ascontiguousarray(array).view(np.uint8).tobytes() if array.dtype != object else repr(array).encode())
    return digest.hexdigest()


@functools.cache
def _environment() -> str:
    """What makes a kernel besides the function and its options: jaxalloc's source files (their
    names, sizes and times: its version does not change with every edit), JAX's and jaxlib's
    versions, the backend, the device and the JAX settings that change a lowering."""
    package = str(Path(__file__).resolve().parents[2])
    files = []
    for folder, _, names in sorted(os.walk(package)):
        for name in sorted(n for n in names if n.endswith(".py")):
            found = os.stat(f"{folder}/{name}")
            files.append((f"{folder[len(package):]}/{name}", found.st_size, found.st_mtime_ns))
    device = jax.devices()[0]
    settings = [getattr(jax.config, name, None) for name in
                ("jax_enable_x64", "jax_default_matmul_precision", "jax_threefry_partitionable", "jax_use_shardy_partitioner")]
    return repr((files, jax.__version__, jaxlib.__version__, jax.default_backend(), device.platform,
                 getattr(device, "device_kind", ""), settings))


def _equations(jaxpr) -> Iterator:
    """Every equation of a jaxpr and of the jaxprs its equations hold."""
    for eqn in jaxpr.eqns:
        yield eqn
        for inner in _inner_jaxprs(eqn.params.values()):
            yield from _equations(inner)


def _inner_jaxprs(values) -> Iterator:
    for value in values:
        if isinstance(value, jax.extend.core.ClosedJaxpr):
            yield value.jaxpr
        elif isinstance(value, jax.extend.core.Jaxpr):
            yield value
        elif isinstance(value, (tuple, list)):
            yield from _inner_jaxprs(value)


def _constants(closed_jaxpr) -> Iterator:
    """The values a jaxpr's text does not spell out: its constants, those of the closed jaxprs its
    equations hold, and every literal (in the order a walk finds them)."""
    yield from closed_jaxpr.consts
    for eqn in _equations(closed_jaxpr.jaxpr):
        yield from (v.val for v in eqn.invars if isinstance(v, jax.extend.core.Literal))
        for value in eqn.params.values():
            for inner in (value if isinstance(value, (tuple, list)) else (value,)):
                if isinstance(inner, jax.extend.core.ClosedJaxpr):
                    yield from inner.consts


def load(key: str) -> StoredKernel | None:
    """The kernel stored under `key`, or None: none there, or one that does not read back whole."""
    folder = cache_dir()
    if folder is None:
        return None
    try:
        data = (folder / f"{key}.kernel").read_bytes()
    except OSError:
        return None
    try:
        header, checksum, body = data.split(b"\n", 2)
        if header + b"\n" != FORMAT or hashlib.sha256(body).hexdigest().encode() != checksum:
            return None
        fields, module = body.split(b"\n", 1)
        found = json.loads(fields)
        if found.pop("key") != key:
            return None
        status = found.pop("status")
        return StoredKernel(module=module, offsets=tuple(found.pop("offsets")), donated=tuple(found.pop("donated")),
                            status=None if status is None else tuple(status), **found)
    except (ValueError, TypeError, KeyError):
        return None


def store(key: str, stored: StoredKernel) -> None:
    """`stored` written under `key`, whole or not at all (written apart, then renamed into place);
    a folder that cannot be written is a warning, not an error: the call goes on without the cache."""
    folder = cache_dir()
    if folder is None:
        return
    fields = {"key": key, **{f: getattr(stored, f) for f in FIELDS}}
    body = json.dumps(fields).encode() + b"\n" + stored.module
    data = FORMAT + hashlib.sha256(body).hexdigest().encode() + b"\n" + body
    try:
        folder.mkdir(parents=True, exist_ok=True)
        handle, written = tempfile.mkstemp(dir=folder, prefix=f".{key}.")
        try:
            with os.fdopen(handle, "wb") as file:
                file.write(data)
            os.chmod(written, 0o644)  # as readable as the files JAX's cache writes
            os.replace(written, folder / f"{key}.kernel")
        finally:
            Path(written).unlink(missing_ok=True)
    except OSError as e:
        warnings.warn(f"jaxalloc could not write to its kernel cache {folder}: {e}", RuntimeWarning, stacklevel=2)


def forget(key: str) -> None:
    """The entry under `key` removed (one that could not be run)."""
    folder = cache_dir()
    if folder is not None:
        (folder / f"{key}.kernel").unlink(missing_ok=True)
