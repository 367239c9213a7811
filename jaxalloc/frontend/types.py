"""How JAX array types appear in the IR: dtype <-> xDSL element type, and byte sizes.

Every JAX dtype has an exact builtin counterpart except PRNG keys, which become
`!jx.key<impl>`; the byte size of a key array follows from its impl's key shape. JAX is
imported where a JAX dtype or a key's impl is asked about, so that passes over the IR load
without it.
"""

from __future__ import annotations

import functools

import ml_dtypes
import numpy as np
from xdsl.dialects import builtin
from xdsl.dialects.builtin import ComplexType, IntegerType, Signedness, TensorType
from xdsl.ir import Attribute

from jaxalloc.dialects.jx import KeyType
from jaxalloc.errors import UnsupportedProgramError

_FLOATS: dict[np.dtype, Attribute] = {
    np.dtype(np.float16): builtin.Float16Type(),
    np.dtype(np.float32): builtin.Float32Type(),
    np.dtype(np.float64): builtin.Float64Type(),
    np.dtype(ml_dtypes.bfloat16): builtin.BFloat16Type(),
    np.dtype(ml_dtypes.float8_e5m2): builtin.Float8E5M2Type(),
    np.dtype(ml_dtypes.float8_e4m3): builtin.Float8E4M3Type(),
    np.dtype(ml_dtypes.float8_e4m3fn): builtin.Float8E4M3FNType(),
    np.dtype(ml_dtypes.float8_e5m2fnuz): builtin.Float8E5M2FNUZType(),
    np.dtype(ml_dtypes.float8_e4m3fnuz): builtin.Float8E4M3FNUZType(),
    np.dtype(ml_dtypes.float8_e4m3b11fnuz): builtin.Float8E4M3B11FNUZType(),
    np.dtype(ml_dtypes.float8_e3m4): builtin.Float8E3M4Type(),
    np.dtype(ml_dtypes.float8_e8m0fnu): builtin.Float8E8M0FNUType(),
    np.dtype(ml_dtypes.float6_e2m3fn): builtin.Float6E2M3FNType(),
    np.dtype(ml_dtypes.float6_e3m2fn): builtin.Float6E3M2FNType(),
    np.dtype(ml_dtypes.float4_e2m1fn): builtin.Float4E2M1FNType(),
}
_DTYPE_OF_FLOAT = {t: d for d, t in _FLOATS.items()}


def element_type(dtype) -> Attribute:
    """The xDSL element type of a JAX dtype (bool is i1, unsigned integers are `ui`)."""
    import jax

    if jax.dtypes.issubdtype(dtype, jax.dtypes.prng_key):
        return KeyType(builtin.StringAttr(dtype._impl.name))
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return IntegerType(1)
    if dtype in _FLOATS:
        return _FLOATS[dtype]
    if jax.numpy.issubdtype(dtype, jax.numpy.integer):
        unsigned = jax.numpy.issubdtype(dtype, jax.numpy.unsignedinteger)
        return IntegerType(ml_dtypes.iinfo(dtype).bits, Signedness.UNSIGNED if unsigned else Signedness.SIGNLESS)
    if dtype.kind == "c":
        return ComplexType(element_type(np.finfo(dtype).dtype))
    raise UnsupportedProgramError(
        f"dtype {dtype} has no IR type; cast it to a numeric dtype before the planned function"
    )


def tensor_type(aval) -> TensorType:
    """The IR type of a JAX abstract value; only static shapes can be planned."""
    shape = getattr(aval, "shape", None)
    if shape is None or not hasattr(aval, "dtype"):
        raise UnsupportedProgramError(f"{aval} is not an array; only array values can be planned")
    if not all(isinstance(d, (int, np.integer)) for d in shape):
        raise UnsupportedProgramError(
            f"shape {tuple(shape)} is dynamic; jaxalloc plans static shapes only "
            "(give the function concrete shapes, e.g. pad to a maximum size)"
        )
    return _tensor_type(aval.dtype, tuple(int(d) for d in shape))


@functools.cache
def _tensor_type(dtype, shape: tuple[int, ...]) -> TensorType:
    """One attribute per dtype and shape: a program has few of them, each built and verified once
    where a conversion would build one for every value."""
    return TensorType(element_type(dtype), shape)


def dtype_of(element: Attribute) -> np.dtype:
    """The numpy dtype holding one element of `element` (PRNG keys: their raw uint32 data)."""
    if isinstance(element, IntegerType):
        if element.width.data == 1:
            return np.dtype(np.bool_)
        unsigned = element.signedness.data == Signedness.UNSIGNED
        name = {4: "int4", 2: "int2"}.get(element.width.data)
        if name is not None:
            return np.dtype(getattr(ml_dtypes, ("u" if unsigned else "") + name))
        return np.dtype(f"{'u' if unsigned else ''}int{element.width.data}")
    if isinstance(element, ComplexType):
        return np.dtype(np.complex64 if dtype_of(element.element_type).itemsize == 4 else np.complex128)
    if isinstance(element, KeyType):
        return np.dtype(np.uint32)
    return _DTYPE_OF_FLOAT[element]


@functools.cache
def byte_size(type_: Attribute) -> int:
    """Bytes that a value of this tensor type occupies (sub-byte types round up per element)."""
    assert isinstance(type_, TensorType)
    elements = int(np.prod(type_.get_shape(), dtype=np.int64))
    element = type_.element_type
    if isinstance(element, KeyType):
        elements *= key_words(element.impl.data)
    return elements * dtype_of(element).itemsize


@functools.lru_cache(maxsize=None)
def key_words(impl: str) -> int:
    """The uint32 words of one PRNG key of this impl."""
    import jax

    return jax.random.key_data(jax.random.key(0, impl=impl)).size
