"""Runs a jx module op by op on jax arrays, releasing each value after its last use.

xDSL's own region runner keeps every SSA value of a region alive until the region
returns; for a memory planner that would be a lie about memory, so blocks are run here
with an environment that drops each value at its last use (see `analysis.liveness.last_uses`).

Two modes: `JxFunctions` runs on plain jax arrays (eager mode; `TracedJxFunctions` traces it into
one computation, as the compiled kernel of a plan that places nothing does); `ArenaFunctions` runs
a planned module inside one arena, every planned value at the place its `mem` attributes give.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax
from jax._src.lax import lax as lax_internal
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import (
    Interpreter,
    InterpreterFunctions,
    OpImplResult,
    PythonValues,
    impl,
    impl_callable,
    register_impls,
)
from xdsl.ir import Block, Operation, SSAValue

from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import NextAttr, SlotAttr, ViewsAttr
from jaxalloc.errors import JaxallocError
from jaxalloc.execution.arena import Arena, Layout, Located, layout_of
from jaxalloc.frontend.bindings import BindTable
from jaxalloc.dialects.mem import places_of
from jaxalloc.frontend.bindings import FusedBinding
from jaxalloc.analysis.inplace import is_view
from jaxalloc.analysis.liveness import last_uses


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
    _fused: dict[Operation, FusedBinding] = field(default_factory=dict)

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
            return self.run_block(interpreter, op.body.block, self.arguments(op, args))
        finally:
            self._env = {}

    def arguments(self, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        """The arguments as the function's block gets them."""
        return tuple(_as_array(a) for a in args)

    def binding(self, op: jx.PrimOp | jx.FusedOp):
        """What the op binds: its primitive, or a fused op's body as one function."""
        if isinstance(op, jx.PrimOp):
            return self.table[op.key.data]
        found = self._fused.get(op)
        if found is None:
            found = self._fused[op] = FusedBinding(op, self.table)
        return found

    def apply(self, op: jx.PrimOp | jx.FusedOp, args: PythonValues) -> PythonValues:
        """Run one op that binds a primitive or a fused body."""
        return self.binding(op).bind(*args)

    @impl(jx.PrimOp)
    def run_prim(self, interpreter: Interpreter, op: jx.PrimOp, args: PythonValues) -> PythonValues:
        return self.apply(op, args)

    @impl(jx.FusedOp)
    def run_fused(self, interpreter: Interpreter, op: jx.FusedOp, args: PythonValues) -> PythonValues:
        return self.apply(op, args)

    @impl(jx.ConstOp)
    def run_const(self, interpreter: Interpreter, op: jx.ConstOp, args: PythonValues) -> PythonValues:
        return (self.table[op.key.data],)

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        state, round_ = args, 0
        while bool(self.run_block(interpreter, op.cond.block, state)[0]):
            state, round_ = self.run_block(interpreter, op.body.block, state), round_ + 1
        _ran(op, round_)
        return state

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        branch = min(max(int(args[0]), 0), len(op.branches) - 1)
        return self.run_block(interpreter, op.branches[branch].block, ())


@register_impls
@dataclass
class TracedJxFunctions(JxFunctions):
    """`JxFunctions` under tracing: a loop is a `lax.while_loop`, a case a `lax.switch`, so the module
    traces into one computation of the program's own ops, as `jax.jit` would trace its jaxpr."""

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        return lax.while_loop(lambda state: self.run_block(interpreter, op.cond.block, state)[0],
                              lambda state: self.run_block(interpreter, op.body.block, state), tuple(args))

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        return lax.switch(args[0], [lambda b=b: self.run_block(interpreter, b.block, ()) for b in op.branches])


def _ran(op: jx.WhileOp, rounds: int) -> None:
    """A loop that says how many rounds it runs (the plan relies on it) must run that many; one that
    says the most it can run (the plan's check relies on it), no more."""
    if op.rounds is not None and op.rounds.data != rounds:
        raise JaxallocError(f"a jx.while that says it runs {op.rounds.data} rounds ran {rounds}: its `rounds` is wrong")
    if op.at_most is not None and rounds > op.at_most.data:
        raise JaxallocError(f"a jx.while that says it runs at most {op.at_most.data} rounds ran {rounds}: its `at_most` is wrong")


@dataclass(frozen=True)
class OpLayout:
    """What running one op in the arena needs to know, read once from its type and attributes."""

    places: tuple[SlotAttr | NextAttr | None, ...]
    offsets: tuple[int | None, ...] | None
    """The places as offsets when none depends on the round (no `mem.next`)."""
    inputs: tuple[Layout, ...]
    outputs: tuple[Layout, ...]
    view: bool
    kernels: dict = field(default_factory=dict)


def op_layout(op: Operation, layouts: dict[Operation, OpLayout]) -> OpLayout:
    """`op`'s layout, read once into `layouts` (shared by the runs of one plan)."""
    found = layouts.get(op)
    if found is None:
        places = tuple(places_of(op))
        static = not any(isinstance(p, NextAttr) for p in places)
        found = layouts[op] = OpLayout(
            places,
            tuple(None if p is None else p.offset.data for p in places) if static else None,
            tuple(layout_of(v.type) for v in op.operands),
            tuple(layout_of(v.type) for v in op.results),
            is_view(op),
        )
    return found


@register_impls
@dataclass
class ArenaFunctions(JxFunctions):
    """The jx ops run inside one arena, as the plan written on the module says.

    A value lives at its `mem.slot`; a loop-carried value at its multi-view's slot for the round
    (`mem.views`), and a value the body computes for the next round at that round's view
    (`mem.next`); a case result where the branch's yield was computed, or, as `mem.phi` says,
    in the memory of the value the branch hands back. Everything else (arguments, constants,
    outputs kept out of the arena) stays a plain jax array; a donated argument (`mem.args`) is
    written at its slot as the call starts. Whatever the plan does not place
    where it is read next is copied there, and counted in `copied_bytes`.
    """

    layouts: dict[Operation, OpLayout] = field(default_factory=dict)
    arena: Arena | None = None
    _next: tuple[int | None, ...] = ()
    _views: list[ViewsAttr] = field(default_factory=list)
    """The multi-views of the loop whose body is being run (`_next`: its next round's places)."""
    _state: tuple = ()
    """Where that loop's carried values are in the round being run."""

    @property
    def copied_bytes(self) -> int:
        return self.arena.copied_bytes if self.arena is not None else 0

    def layout(self, op: Operation) -> OpLayout:
        return op_layout(op, self.layouts)

    def new_arena(self, nbytes: int) -> Arena:
        return Arena(nbytes)

    def where(self, place: SlotAttr | NextAttr | None) -> int | None:
        """The arena offset of a place in the round being run (None: outside the arena)."""
        if isinstance(place, NextAttr):
            if place.nth.data:  # a toggle ring's further free slot
                k = place.position.data
                return _next_place(self._views[k], 0, self._state, k, place.nth.data)
            return self._next[place.position.data]
        return None if place is None else place.offset.data

    @impl_callable(jx.FuncOp)
    def call_func(self, interpreter: Interpreter, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        self.arena = self.new_arena(op.attributes["mem.arena"].bytes.data)
        self._next = ()
        results = super().call_func(interpreter, op, args)
        outputs = op.body.block.last_op.operands
        self.arena.current = op.body.block.last_op
        return tuple(self.arena.read(v, layout_of(o.type)) for v, o in zip(results, outputs))

    def arguments(self, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        """Donated arguments (`mem.args`) are written at their slots as the call starts: the function
        reads them in the arena, where later values may take their bytes (the call then deletes the
        caller's arrays that `jax.jit` would)."""
        args = super().arguments(op, args)
        donated = donated_slots(op)
        if not donated:
            return args
        self.arena.current = op
        positions = list(donated)
        written = self.arena.enter(
            [args[k] for k in positions], [layout_of(op.body.block.args[k].type) for k in positions],
            [donated[k] for k in positions], [op.body.block.args[k] for k in positions],
        )
        return replace(args, positions, written)

    def apply(self, op: jx.PrimOp | jx.FusedOp, args: PythonValues) -> PythonValues:
        layout = self.layouts.get(op) or self.layout(op)
        self.arena.current = op
        places = layout.offsets or tuple(self.where(p) for p in layout.places)
        if layout.view and isinstance(args[0], int) and places[0] in (None, args[0]):
            return (args[0],)  # the operand's bytes, read as the result's type
        return self.arena.run(self.binding(op), args, layout.inputs, places, layout.outputs, layout.kernels)

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        layouts = self.layout(op).outputs
        views = [v.within(self._next_slot) for v in op.attributes["mem.views"].data]
        # a ring's first slot is the init operand's memory (`Carry.initial` empty): round 0 reads the
        # init operand where it lies, which in an enclosing loop's first round may be that loop's
        # init operand (read in place, never written while the loop runs) or outside the arena; the
        # first value the body computes goes to the slot
        self.arena.current, rounds = op, self.arena.rounds
        rounds.append([op, 0])
        state, round_ = self._outside(views, 0, self._round(views, 0, args, args), layouts), 0
        outer_next, outer_views, outer_state = self._next, self._views, self._state
        try:
            while self._holds(self.run_block(interpreter, op.cond.block, state)[0], op.cond.block):
                self._next, self._views = tuple(_next_place(v, round_ + 1, state, k) for k, v in enumerate(views)), views
                self._state = state
                yielded = self.run_block(interpreter, op.body.block, state)
                round_ += 1
                self.arena.current, rounds[-1][1] = op, round_
                ring = [k for k, v in enumerate(views) if isinstance(v.view(round_), SlotAttr)]  # read from a slot
                carried = replace(yielded, ring, self.arena.move(
                    [yielded[k] for k in ring], [layouts[k] for k in ring], [self._next[k] for k in ring]
                ))
                state = self._outside(views, round_, self._round(views, round_, args, carried), layouts)
            _ran(op, round_)
        finally:
            self._next, self._views, self._state = outer_next, outer_views, outer_state
            rounds.pop()
        return state

    def _next_slot(self, position: int) -> SlotAttr | None:
        """The enclosing loop's next view of `position` in the round being run, as a slot of its ring."""
        offset = self._next[position]
        return None if offset is None else SlotAttr(offset, self._views[position].slots.data[0].size.data)

    def _round(self, views, round_: int, inits: PythonValues, carried: PythonValues) -> tuple[Located, ...]:
        """Where each carried value is in round `round_`: an init operand read in place, or the value
        carried into the round (in its ring slot, or outside the arena)."""
        located = []
        for view, value in zip(views, carried):
            at = view.view(round_)
            located.append(inits[at] if isinstance(at, int) else value)
        return tuple(located)

    def _outside(self, views, round_: int, state: tuple, layouts) -> tuple[Located, ...]:
        """Carried values the plan keeps outside the arena (no view) but found in it, read out: the
        memory they were found in (a loop body's or branch's own) is reused in the next round."""
        return tuple(
            self.arena.copy_out(value, layout) if view.view(round_) is None and isinstance(value, int) else value
            for view, value, layout in zip(views, state, layouts)
        )

    def _holds(self, value: Located, cond: Block) -> bool:
        return bool(self.arena.read(value, layout_of(cond.last_op.operands[0].type)))

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        layout = self.layout(op)
        self.arena.current = op
        branch = min(max(int(self.arena.read(args[0], layout.inputs[0])), 0), len(op.branches) - 1)
        yielded = self.run_block(interpreter, op.branches[branch].block, ())
        phis = op.attributes.get("mem.phi")
        views = [tuple(p.get_values()) for p in phis.data] if phis is not None else [()] * len(op.results)
        places = [None if branch in v else self.where(p) for p, v in zip(layout.places, views)]
        moved = [k for k, place in enumerate(places) if place is not None]
        self.arena.current = op
        results = replace(yielded, moved, self.arena.move(
            [yielded[k] for k in moved], [layout.outputs[k] for k in moved], [places[k] for k in moved]
        ))
        results = replace(results, *twice(op.branches[branch].block, views, branch, results))
        # a result kept outside the arena that the branch left in its own memory is read out of it
        return tuple(
            self.arena.copy_out(value, out) if place is None and branch not in phi and isinstance(value, int) else value
            for value, place, phi, out in zip(results, places, views, layout.outputs)
        )


def donated_slots(op: jx.FuncOp) -> dict[int, int]:
    """The function's donated arguments (`mem.args`): position -> arena offset."""
    slots = op.attributes.get("mem.args")
    if slots is None:
        return {}
    return {k: s.offset.data for k, s in enumerate(slots.data) if s.size.data}


def delete(value: Any) -> None:
    """Free a donated array the caller passed, as `jax.jit` does (tracers and freed arrays left be)."""
    if isinstance(value, jax.Array) and not isinstance(value, jax.core.Tracer) and not value.is_deleted():
        value.delete()


def replace(values: PythonValues, positions: list[int], replacements: PythonValues) -> tuple:
    """`values` with those at `positions` replaced, in order."""
    result = list(values)
    for k, value in zip(positions, replacements):
        result[k] = value
    return tuple(result)


def twice(block: Block, phis, branch: int, results: tuple) -> tuple[list[int], list]:
    """A branch yielding one value at several results makes the later ones views of the first
    (`mem.phi`): positions and values to replace."""
    first: dict[SSAValue, int] = {}
    positions, values = [], []
    for k, value in enumerate(block.last_op.operands):
        if value in first and branch in phis[k]:
            positions.append(k)
            values.append(results[first[value]])
        first.setdefault(value, k)
    return positions, values


def _next_place(views: ViewsAttr, round_: int, state: Sequence[Located], k: int, nth: int = 0) -> int | None:
    """Where the body computes carried position `k`'s value for round `round_`: that round's view,
    or the slot its toggle ring picks (`ViewsAttr.toggle`, the `nth` free one) from where the current
    values are."""
    if views.toggles:
        places = [state[j] if isinstance(state[j], int) else None for j in (k, *views.held)]
        return views.toggle(*places, nth=nth).offset.data
    return _offset(views.view(round_))


def _offset(view: int | SlotAttr | None) -> int | None:
    return view.offset.data if isinstance(view, SlotAttr) else None


class LiveBytesSampler:
    """Interpreter listener sampling the bytes in use after every op: the device's own count where
    `memory_stats()` reports one, else the bytes of every live jax array."""

    def __init__(self, device=None):
        self.device = device or jax.devices()[0]
        self.before = self.sample()
        self.peak = self.before

    def sample(self) -> int:
        stats = self.device.memory_stats()
        if stats and "bytes_in_use" in stats:
            return int(stats["bytes_in_use"])
        return sum(a.nbytes for a in jax.live_arrays())

    def will_interpret_op(self, op, args) -> None:
        pass

    def did_interpret_op(self, op, results) -> None:
        self.take()

    def take(self) -> None:
        self.peak = max(self.peak, self.sample())


def _as_array(value: Any) -> Any:
    """An argument as `jax.jit` sees it: NumPy arrays and Python scalars become jax arrays of the
    canonical dtype (weakly typed for Python scalars), so an argument returned as an output
    comes back as `jax.jit` returns it."""
    return value if isinstance(value, jax.Array) else jnp.asarray(value)


class JxInterpreter(Interpreter):
    """xDSL's interpreter, raising an op's exception as the op raised it.

    xDSL's own adds a note to the exception at every op it passes through, the whole module printed.
    The compiled executor learns a case's result kinds by raising `Widen` and `Retrace` through
    the ops around it as it traces, and that printing took a third of the first call of a diffrax
    solve's gradient (6 of 18 s)."""

    def _run_op(self, op: Operation, inputs: PythonValues) -> OpImplResult:
        found = self._impls._impl_dict.get(type(op))
        if found is None or len(inputs) != len(op.operands):
            return super()._run_op(op, inputs)  # xDSL's message
        functions, implementation = found
        for listener in self.listeners:
            listener.will_interpret_op(op, inputs)
        result = implementation(functions, self, op, inputs)
        for listener in self.listeners:
            listener.did_interpret_op(op, result.values)
        return result


def make_interpreter(module: ModuleOp, functions: JxFunctions, listeners=()) -> Interpreter:
    """An xDSL interpreter for one run of a converted module: `call_op(name, args)`."""
    interpreter = JxInterpreter(module, listeners=tuple(listeners))
    interpreter.register_implementations(functions)
    return interpreter


def weak_type(value) -> bool:
    """Whether `value` is weakly typed: the attribute of a jax array, without making its aval."""
    weak = getattr(value, "weak_type", None)
    return jax.typeof(value).weak_type if weak is None else weak


def with_weak_type(value, aval):
    """`value` typed as the jaxpr says: op-by-op execution can lose weak types that jit keeps
    (e.g. `dynamic_update_slice` of a weakly typed buffer), or keep one the jaxpr drops (a loop
    result that is a weakly typed init operand read in place), which changes later promotion."""
    weak = getattr(aval, "weak_type", False)
    if weak != weak_type(value):
        return lax_internal._convert_element_type(value, aval.dtype, weak_type=weak)
    return value
