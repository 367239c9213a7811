"""Random bits as the Threefry hash XLA fuses, not the loop XLA's CPU backend runs.

JAX draws random bits from a Threefry-2x32 key by hashing each element's index with the key. On the
CPU, JAX lowers the hash as a loop over its five groups of rounds (to compile faster), whose state is
two arrays of 32-bit words the size of the draw: a dropout mask of 1 MiB holds 3 MiB of XLA's temp
(the loop's state, and a copy), which no plan sees. Spelled out round by round, the hash is
elementwise arithmetic on each element's index, which XLA fuses into the op that reads the bits:
no memory at all, the same bits. On other backends JAX lowers it so already.
"""

from __future__ import annotations

import math

import jax
import numpy as np
from jax import lax

from jaxalloc.passes.element_index import row_major_index

ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
"""Threefry-2x32's rotations, by turns for each group of four rounds."""

PARITY = np.uint32(0x1BD11BDA)
"""The constant of the third key word: Threefry's key schedule parity."""


def unrollable(impl: str, bit_width, shape) -> bool:
    """Whether `random_bits` of a key of `impl` is the hash `unrolled_bits` computes: a Threefry key,
    JAX's partitionable bits (each element hashes its own index), of at most 32 bits and fewer than
    2**32 elements (an index of one word)."""
    return (
        impl == "threefry2x32" and jax.config.jax_threefry_partitionable
        and bit_width in (8, 16, 32) and isinstance(shape, tuple) and 0 < math.prod(shape) < 2**32
    )


def _rotated(x, bits: int):
    return lax.shift_left(x, np.uint32(bits)) | lax.shift_right_logical(x, np.uint32(32 - bits))


def threefry_2x32(k1, k2, x1, x2):
    """The Threefry-2x32 hash (20 rounds) of the word pairs `(x1, x2)` under the key `(k1, k2)`."""
    keys = (k1, k2, k1 ^ k2 ^ PARITY)
    x1, x2 = x1 + keys[0], x2 + keys[1]
    for group in range(5):
        for bits in ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = x1 ^ _rotated(x2, bits)
        x1 = x1 + keys[(group + 1) % 3]
        x2 = x2 + keys[(group + 2) % 3] + np.uint32(group + 1)
    return x1, x2


def unrolled_bits(key, *, bit_width: int, shape: tuple[int, ...]):
    """`jax.random.bits(key, shape, uint<bit_width>)` where `unrollable`: each element's index in the
    draw, its high word 0, hashed with the key's two words."""
    words = jax.random.key_data(key)
    k1, k2 = words[0], words[1]
    index = row_major_index(shape, range(len(shape)), np.uint32)
    high, low = threefry_2x32(k1, k2, lax.full(shape, 0, np.uint32), index)
    bits = high ^ low
    return bits if bit_width == 32 else lax.convert_element_type(bits, np.dtype(f"uint{bit_width}"))
