"""Functions and example arguments named on the command line.

`MODULE:FUNCTION` names the function (MODULE is an importable name or a path to a .py
file). Example arguments are shape specs such as `f32[64,512]`, `i32[]` or `bool[3]`
(read as `jax.ShapeDtypeStruct`s, nothing is allocated), or `--args-from NAME`, a function
in the same module that returns the argument tuple.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

import jax
import numpy as np

from jaxalloc.errors import JaxallocError, first_line

DTYPES = {
    "bool": np.bool_,
    "i8": np.int8,
    "i16": np.int16,
    "i32": np.int32,
    "i64": np.int64,
    "u8": np.uint8,
    "u16": np.uint16,
    "u32": np.uint32,
    "u64": np.uint64,
    "f16": jax.numpy.float16,
    "bf16": jax.numpy.bfloat16,
    "f32": np.float32,
    "f64": np.float64,
    "c64": np.complex64,
    "c128": np.complex128,
}
WIDE = ("i64", "u64", "f64", "c128")
"""The 64-bit types, which JAX keeps only with `jax_enable_x64`."""
_SPEC = re.compile(r"^([a-z0-9]+)\[((?:\d+(?:,\d+)*)?)\]$")


def parse_shape_spec(spec: str) -> jax.ShapeDtypeStruct:
    """`f32[64,512]` -> ShapeDtypeStruct((64, 512), float32)."""
    match = _SPEC.match(spec.replace(" ", ""))
    if match is None or match.group(1) not in DTYPES:
        raise JaxallocError(
            f"bad argument spec {spec!r}: write DTYPE[DIMS], e.g. f32[64,512] or i32[], "
            f"with DTYPE one of {', '.join(DTYPES)}"
        )
    if match.group(1) in WIDE and not jax.config.jax_enable_x64:
        raise JaxallocError(
            f"{spec} is a 64-bit type, which JAX makes 32-bit unless 64-bit types are on: "
            "pass --x64 (or set JAX_ENABLE_X64=1)"
        )
    dims = match.group(2).split(",") if match.group(2) else []
    return jax.ShapeDtypeStruct(tuple(int(d) for d in dims), DTYPES[match.group(1)])


def load_module(name: str) -> ModuleType:
    """Import a module by dotted name, or load it from a .py path.

    A dotted name that names a .py file under the current directory (`benchmarks.models`) loads
    that file: an installed package of the same top-level name (xdsl installs `benchmarks`) would
    otherwise hide it.
    """
    local = Path(*name.split(".")).with_suffix(".py") if name.replace(".", "").isidentifier() else None
    if local is not None and local.is_file():
        name = str(local)
    if name.endswith(".py") or "/" in name:
        path = Path(name)
        if not path.is_file():
            raise JaxallocError(f"no such file: {name}")
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.path.insert(0, str(path.resolve().parent))
        try:
            spec.loader.exec_module(module)
        except Exception as e:
            raise JaxallocError(f"importing {name} failed: {type(e).__name__}: {e}") from e
        return module
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as e:
        raise JaxallocError(f"cannot import module {name!r}: {e}; give the path of its .py file instead") from None


def load_function_and_args(target: str, specs: list[str], args_from: str | None):
    """The function named by `target` and its example arguments."""
    module_name, sep, function_name = target.rpartition(":")
    if not sep or not module_name or not function_name:
        raise JaxallocError(f"expected MODULE:FUNCTION, got {target!r}")
    module = load_module(module_name)
    fn = _attribute(module, function_name)
    if args_from is not None:
        if specs:
            raise JaxallocError("give either shape specs or --args-from, not both")
        make_args = _attribute(module, args_from)
        try:
            args = make_args()
        except Exception as e:
            raise JaxallocError(f"--args-from {args_from}() raised {first_line(e)}") from e
        return fn, tuple(args) if isinstance(args, (tuple, list)) else (args,)
    if not specs:
        raise JaxallocError("give example arguments: shape specs such as f32[64,512], or --args-from FUNCTION")
    return fn, tuple(parse_shape_spec(s) for s in specs)


def _attribute(module: ModuleType, name: str):
    value = getattr(module, name, None)
    if not callable(value):
        raise JaxallocError(f"module {module.__name__!r} has no function {name!r}")
    return value
