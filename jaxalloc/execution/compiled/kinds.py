"""What a value is while the kernel is traced: in the arena (`At`), an array outside it, or, where a
loop or a branch may leave it either way, `Either`. Loops carry and branches return each value in
one kind, guessed from the plan and widened where the guess was wrong (`Widen`, `Retrace`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from xdsl.ir import Operation

from jaxalloc.execution.arena import Layout, from_bytes


@dataclass(frozen=True)
class At:
    """A value in the arena at `offset` (a Python int, or a traced int32 where it depends on the round)."""

    offset: Any


@dataclass(frozen=True)
class Either:
    """A value in the arena at `offset` where `inside` holds, else the array `value`."""

    inside: Any
    offset: Any
    value: Any


jax.tree_util.register_dataclass(At, data_fields=["offset"], meta_fields=[])
jax.tree_util.register_dataclass(Either, data_fields=["inside", "offset", "value"], meta_fields=[])


class Kind(enum.Enum):
    """How a loop carries or a branch returns a value: the classes above, or an array (`VALUE`)."""

    AT = "at"
    EITHER = "either"
    VALUE = "value"


def kind_of(value) -> Kind:
    return Kind.AT if isinstance(value, At) else Kind.EITHER if isinstance(value, Either) else Kind.VALUE


def joined(a: Kind, b: Kind) -> Kind:
    """The kind that holds values of both kinds."""
    return a if a == b else Kind.EITHER


class Widen(Exception):
    """A loop or branch produced a value of a kind it does not carry: trace it again, wider."""

    def __init__(self, owner: Operation | None, position: int, kind: Kind):
        super().__init__(f"result {position} of {owner.name} needs the kind {kind.value}")
        self.owner, self.position, self.kind = owner, position, kind


class Retrace(Exception):
    """A case widened a result after it had bound a conditional of its chain
    (`CompiledFunctions.switch`): that conditional stays in the trace, its effects and its update of
    the arena with it, so the whole kernel is traced again, the case's kinds wide from the start
    (`CompiledFunctions.widened`)."""


def chosen(either: Either, loaded):
    """An `Either`'s value, given what its offset in the arena holds."""
    return jax.tree.map(lambda a, b: lax.select(jnp.broadcast_to(either.inside, a.shape), a, b), loaded, either.value)


def placeholder(kind: Kind, layout: Layout):
    """What a conditional whose branch does not run hands on for a result of `kind`."""
    if kind == Kind.AT:
        return At(jnp.int32(0))
    return unread_zeros(layout) if kind == Kind.VALUE else Either(jnp.bool_(False), jnp.int32(0), unread_zeros(layout))


def unread_zeros(layout: Layout):
    """A value of `layout` that no one reads: where a kind holds an array, but not this time."""
    return from_bytes(jnp.zeros(layout.nbytes, jnp.uint8), layout)
