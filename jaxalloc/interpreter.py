"""Runs a jx module op by op on jax arrays (eager mode), releasing each value after its last use.

xDSL's own region runner keeps every SSA value of a region alive until the region
returns; for a memory planner that would be a lie about memory, so blocks are run here
with an environment that drops each value at its last use (see `liveness.last_uses`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    PythonValues,
    impl,
    impl_callable,
    register_impls,
)
from xdsl.ir import Block, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.frontend import BindTable
from jaxalloc.liveness import last_uses


class Schedules:
    """Each block's run schedule, computed once per module and shared by every run of it."""

    def __init__(self) -> None:
        self._steps: dict[Block, list[tuple]] = {}

    def __call__(self, block: Block) -> list[tuple]:
        """Per op of `block`: the op, its operands, its results, the values dying at it."""
        steps = self._steps.get(block)
        if steps is None:
            steps = self._steps[block] = [
                (op, tuple(op.operands), tuple(op.results), tuple(dead))
                for op, dead in zip(block.ops, last_uses(block))
            ]
        return steps


@register_impls
@dataclass
class JxFunctions(InterpreterFunctions):
    """Implementations of the jx ops over jax arrays, for one run (the environment is per run).

    `table` holds what `jx.prim` binds and `jx.const` returns.
    """

    table: BindTable
    schedules: Schedules = field(default_factory=Schedules)
    _env: dict[SSAValue, Any] = field(default_factory=dict)

    def run_block(self, interpreter: Interpreter, block: Block, args: PythonValues) -> PythonValues:
        """Run `block` to its `jx.yield` and return the yielded values."""
        env = self._env
        env.update(zip(block.args, args, strict=True))
        for op, operands, results, dead in self.schedules(block):
            inputs = tuple(env[v] for v in operands)
            if not isinstance(op, jx.YieldOp):
                env.update(zip(results, interpreter.run_op(op, inputs)))
            for value in dead:
                del env[value]
        return inputs

    @impl_callable(jx.FuncOp)
    def call_func(self, interpreter: Interpreter, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        self._env = {}
        try:
            return self.run_block(interpreter, op.body.block, tuple(_as_array(a) for a in args))
        finally:
            self._env = {}

    @impl(jx.PrimOp)
    def run_prim(self, interpreter: Interpreter, op: jx.PrimOp, args: PythonValues) -> PythonValues:
        return self.table[op.key.data].bind(*args)

    @impl(jx.ConstOp)
    def run_const(self, interpreter: Interpreter, op: jx.ConstOp, args: PythonValues) -> PythonValues:
        return (self.table[op.key.data],)

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        state = args
        while bool(self.run_block(interpreter, op.cond.block, state)[0]):
            state = self.run_block(interpreter, op.body.block, state)
        return state

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        branch = min(max(int(args[0]), 0), len(op.branches) - 1)
        return self.run_block(interpreter, op.branches[branch].block, ())


def _as_array(value: Any) -> Any:
    """An argument as `jax.jit` sees it: NumPy arrays and Python scalars become jax arrays of the
    canonical dtype (weakly typed for Python scalars), so an argument returned as an output
    comes back as `jax.jit` returns it."""
    return value if isinstance(value, jax.Array) else jnp.asarray(value)


def make_interpreter(
    module: ModuleOp, table: BindTable, listeners=(), schedules: Schedules | None = None
) -> Interpreter:
    """An xDSL interpreter for one run of a converted module: `call_op(name, args)`."""
    interpreter = Interpreter(module, listeners=tuple(listeners))
    interpreter.register_implementations(JxFunctions(table, schedules or Schedules()))
    return interpreter
