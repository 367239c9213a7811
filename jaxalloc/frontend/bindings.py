"""What the keys of `jx.prim` and `jx.const` stand for: the side table beside the IR.

Kept apart from the converter so that passes which only carry keys around (`xdsl-opt` runs them)
load without JAX.
"""

from __future__ import annotations

import functools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from jaxalloc.dialects import jx

if TYPE_CHECKING:
    from jax.extend.core import Primitive


@dataclass(frozen=True)
class Binding:
    """What `jx.prim` binds: the primitive and its parameters as JAX's own evaluator passes them."""

    primitive: Primitive
    params: dict[str, Any]

    @functools.cached_property
    def key(self) -> Hashable:
        """Equal for bindings of one primitive with equal parameters, so they can share compiled
        code; a binding with unhashable parameters is only equal to itself."""
        key = (self.primitive, tuple(sorted(self.params.items())))
        try:
            hash(key)
        except TypeError:
            return (self.primitive, id(self))
        return key

    def bind(self, *args):
        out = self.primitive.bind(*args, **self.primitive.get_bind_params(self.params))
        return tuple(out) if self.primitive.multiple_results else (out,)


@dataclass
class BindTable:
    """The side table behind the IR: keys of `jx.prim` and `jx.const` index `entries`."""

    entries: list[Any] = field(default_factory=list)

    def add(self, entry: Any) -> int:
        self.entries.append(entry)
        return len(self.entries) - 1

    def __getitem__(self, key: int) -> Any:
        return self.entries[key]


@dataclass(frozen=True, eq=False)
class FusedBinding:
    """What a `jx.fused` op binds: its body's primitives in order, as one function of its operands
    (the executors bind it like a primitive; under `jax.jit` it is one kernel)."""

    op: jx.FusedOp
    table: BindTable

    @property
    def key(self) -> tuple:
        return ("jx.fused", id(self.op))

    def bind(self, *args):
        env = dict(zip(self.op.body.block.args, args))
        for inner in self.op.body.block.ops:
            if isinstance(inner, jx.YieldOp):
                return tuple(env[v] for v in inner.operands)
            env.update(zip(inner.results, self.table[inner.key.data].bind(*(env[v] for v in inner.operands))))
        raise AssertionError("a jx.fused body ends in jx.yield")
