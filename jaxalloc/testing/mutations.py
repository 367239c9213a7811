"""Corrupt valid plans at random and see who notices: the static plan checker, the sanitizer, the result.

A mutation edits the `mem` attributes of a planned module the way a planner bug would:

- `move`: a value's slot moved onto the slot of another value of the same block;
- `swap`: two values of one block trade slots;
- `shorten ring`: a loop's multi-view loses its last slot (a ring one round too short);
- `drop keep-alive`: a value defined after a case or a loop takes the slot of the value a case
  result views (`mem.phi`) or that a loop reads in place in its first rounds, as if the planner had
  forgotten to keep it alive.

`try_mutation` runs the corrupted module through the static checker, in the arena, and checked,
and compares the arena's outputs with those of the valid plan. Every corruption that changes a
result must be caught by both checkers.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import jax
import numpy as np
from xdsl.dialects.builtin import ArrayAttr

from jaxalloc.checks.plan_check import check_planned
from jaxalloc.checks.sanitizer import CheckedFunctions
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import SlotAttr, ViewsAttr
from jaxalloc.errors import PlanViolation
from jaxalloc.execution.interpreter import ArenaFunctions, make_interpreter

KINDS = ("move", "swap", "shorten ring", "drop keep-alive")


@dataclass(frozen=True)
class Outcome:
    kind: str
    what: str
    changed: bool
    """The arena run's outputs differ from the valid plan's (or the run failed)."""
    static: bool
    """The static plan checker raised `PlanViolation`."""
    sanitizer: bool
    """The checked run raised `PlanViolation`."""


def _slotted(func) -> list[jx.PrimOp]:
    return [op for op in func.walk() if isinstance(op, jx.PrimOp) and isinstance(op.attributes.get("mem.slot"), SlotAttr)]


def mutate(func: jx.FuncOp, kind: str, rng: random.Random) -> str | None:
    """Apply one corruption of `kind` to a planned function in place; None where none applies."""
    ops = _slotted(func)
    if kind == "move" and len(ops) >= 2:
        op = rng.choice(ops)
        elsewhere = [o for o in ops if o.attributes["mem.slot"].offset != op.attributes["mem.slot"].offset]
        if not elsewhere:
            return None
        other = rng.choice(elsewhere)
        op.attributes["mem.slot"] = SlotAttr(other.attributes["mem.slot"].offset.data, op.attributes["mem.slot"].size.data)
        return f"{op.primitive.data} onto {other.primitive.data}"
    if kind == "swap" and len(ops) >= 2:
        op, other = rng.sample(ops, 2)
        a, b = op.attributes["mem.slot"], other.attributes["mem.slot"]
        if a.size != b.size or a == b:
            return None
        op.attributes["mem.slot"], other.attributes["mem.slot"] = b, a
        return f"{op.primitive.data} <-> {other.primitive.data}"
    if kind == "shorten ring":
        rings = [(loop, k) for loop in func.walk() if isinstance(loop, jx.WhileOp)
                 for k, v in enumerate(loop.attributes["mem.views"].data) if v.repeat >= 2]
        if not rings:
            return None
        loop, k = rng.choice(rings)
        views = list(loop.attributes["mem.views"].data)
        views[k] = ViewsAttr([i.data for i in views[k].initial.data], views[k].slots.data[:-1])
        loop.attributes["mem.views"] = ArrayAttr(views)
        return f"ring {k} of a loop to {views[k].repeat} slots"
    if kind == "drop keep-alive":
        kept = _kept_alive(func)
        if not kept:
            return None
        source, region_op = rng.choice(kept)
        later = [op for op in _slotted(func) if op.parent_block() is region_op.parent_block() and region_op.is_before_in_block(op)]
        if not later:
            return None
        op = rng.choice(later)
        op.attributes["mem.slot"] = SlotAttr(source.owner.attributes["mem.slot"].offset.data, op.attributes["mem.slot"].size.data)
        return f"{op.primitive.data} onto {source.owner.primitive.data}, viewed by a {region_op.name}"
    return None


def _kept_alive(func) -> list:
    """(value, region op) pairs: a case result may view the value, or a loop reads it in place."""
    found = []
    for op in func.walk():
        if isinstance(op, jx.CaseOp) and "mem.phi" in op.attributes:
            for b, branch in enumerate(op.branches):
                for k, value in enumerate(branch.block.last_op.operands):
                    if b in op.attributes["mem.phi"].data[k].get_values() and _slotted_value(value):
                        found.append((value, op))
        if isinstance(op, jx.WhileOp):
            for view in op.attributes["mem.views"].data:
                found.extend((op.inits[i.data], op) for i in view.initial.data if _slotted_value(op.inits[i.data]))
    return found


def _slotted_value(value) -> bool:
    return isinstance(getattr(value, "owner", None), jx.PrimOp) and isinstance(value.owner.attributes.get("mem.slot"), SlotAttr)


class OpBudget:
    """Interpreter listener that stops a run after `limit` ops: a corrupted ring can overwrite a
    loop's counter, and the loop would never end."""

    def __init__(self, limit: int):
        self.limit, self.ops = limit, 0

    def will_interpret_op(self, op, args) -> None:
        self.ops += 1
        if self.ops > self.limit:
            raise RuntimeError(f"stopped after {self.limit} ops")

    def did_interpret_op(self, op, results) -> None:
        pass


def run_plan(module, table, args, functions_type=ArenaFunctions, limit: int = 10**7):
    """Run a planned module's function on flat arguments; returns the outputs and the ops run."""
    func = next(iter(module.ops))
    budget = OpBudget(limit)
    outputs = make_interpreter(module, functions_type(table), [budget]).call_op(func.sym_name.data, tuple(args))
    return outputs, budget.ops


def _same(a, b) -> bool:
    for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b)):
        x, y = np.asarray(jax.random.key_data(x) if jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) else x), np.asarray(
            jax.random.key_data(y) if jax.dtypes.issubdtype(y.dtype, jax.dtypes.prng_key) else y)
        if x.shape != y.shape or not np.array_equal(x, y, equal_nan=True):
            return False
    return True


def try_mutation(plan, table, args, valid, kind: str, rng: random.Random) -> Outcome | None:
    """Corrupt a copy of `plan.module` once and run it every way; None where `kind` does not apply.
    `valid` is what `run_plan` gave for the valid plan."""
    expected, ops = valid
    limit = 20 * ops + 1000
    module = plan.module.clone()
    what = mutate(next(iter(module.ops)), kind, rng)
    if what is None:
        return None
    try:
        check_planned(next(iter(module.ops)))
        static = False
    except PlanViolation:
        static = True
    try:
        changed = not _same(run_plan(module, table, args, limit=limit)[0], expected)
    except Exception:  # a corrupted ring may even stop a loop from ending
        changed = True
    try:
        run_plan(module, table, args, CheckedFunctions, limit)
        sanitizer = False
    except PlanViolation:
        sanitizer = True
    except Exception:
        sanitizer = False
    return Outcome(kind, what, changed, static, sanitizer)
