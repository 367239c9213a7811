"""The jx ops traced into one kernel over the arena: the xDSL interpreter runs the planned module under
`jax.jit` tracing, and each op reads its operands out of the arena at their planned offsets, binds
its primitive and writes its results back at theirs.

`jx.while` becomes `lax.while_loop` with the arena in its carry; round `r` finds each carried value
at its multi-view's slot for `r`, an offset computed from the round (NNC's pointer update), so no
value moves between rounds. `jx.case` becomes conditionals over the arena (`switch`).

On the CPU a small loop (`SMALL_LOOP_BYTES`) is one call that XLA compiles into one kernel
(`one_kernel`): its runtime otherwise runs each of the body's ops as a kernel of its own, each
round, and in the arena an op is two or three of them. A loop that says it runs several rounds
(`jx.while ... rounds`) counts them in its condition, where XLA sees its trip count (on the GPU, a
condition it cannot count is read back to the host each round); the program's own condition still
runs, and a round where it disagrees with the count fails the call as a loop that ran other rounds
than planned does. A loop's condition runs at the end of the body that precedes it (and once before
the loop), so that whatever the condition writes into the arena is written in the loop's own carry:
XLA would copy the arena for a `cond_fun` that writes."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.experimental.xla_metadata import set_xla_metadata
from xdsl.interpreter import Interpreter, PythonValues, impl, impl_callable, register_impls
from xdsl.ir import Operation

from jaxalloc.analysis.inplace import PRODUCTS
from jaxalloc.analysis.rounds import said_rounds_proven
from jaxalloc.dialects import jx
from jaxalloc.dialects.mem import MultiView, NextAttr, Place, ViewsAttr
from jaxalloc.execution.arena import Layout, from_words, layout_of, to_words
from jaxalloc.execution.compiled.guards import (
    ONE_KERNEL_CALL, SMALL_LOOP_BYTES, UNSEEN, bytes_free, compiles_into_one_kernel, hideable, hidden, indexes,
    packed, read_all, read_everywhere, spreads,
)
from jaxalloc.execution.compiled.kinds import (
    At, Either, Kind, Retrace, Widen, joined, kind_of, placeholder, unread_zeros,
)
from jaxalloc.execution.compiled.offsets import (
    TRACED, contiguous, entry, int32, over, plus, same, window_start,
)
from jaxalloc.execution.compiled.traced_arena import TracedArena, slice_words
from jaxalloc.execution.interpreter import (
    JxFunctions, OpLayout, donated_slots, op_layout, replace, twice, with_weak_type,
)


class _Settled(Exception):
    """A loop's carried values that lie at the same constant offset in every round: trace it again
    with them there, or (None) not, after all (`CompiledFunctions.loop`)."""

    def __init__(self, owner: Operation, offsets: dict[int, int | None]):
        super().__init__(f"results {sorted(offsets)} of {owner.name} lie at constant offsets")
        self.owner, self.offsets = owner, offsets


def _pins_reads(op: Operation, args: PythonValues, layout) -> bool:
    """Whether an op that writes nothing into the arena reads fewer bytes of it than it computes
    (not a matrix product or convolution, which XLA computes into a buffer of its own anyway): its
    reads are then pinned, each once into a buffer of its own (`kept_outside`)."""
    if isinstance(op, jx.PrimOp) and op.primitive.data in PRODUCTS:
        return False
    read = sum(lay.nbytes for v, lay in zip(args, layout.inputs) if isinstance(v, At | Either))
    return read < sum(lay.nbytes for lay in layout.outputs)


def carried_kind(view: MultiView, inits) -> Kind:
    """The kind of what a round after the first reads, as far as the plan tells."""
    kinds = {kind_of(inits[i]) for i in view.initial[1:] if view.slots or view.yielded} | (
        {kind_of(inits[i]) for i in view.initial} if not (view.slots or view.yielded) else set()
    )
    if view.slots and not view.yielded:
        kinds.add(Kind.AT)
    elif view.outside:
        kinds.add(Kind.VALUE)
    elif view.yielded and not kinds:  # a guess, widened where the body yields something else: a toggle
        kinds.add(Kind.AT if view.slots else Kind.VALUE)  # ring's slot, else a value of its own outside
    return kinds.pop() if len(kinds) == 1 else Kind.EITHER


def settled_at(view: MultiView, offset) -> bool:
    """Whether every round after the first finds the value at `offset`: a ring of one slot there,
    after one init operand at most (`_Settled`)."""
    return len(view.initial) <= 1 and len(view.slots) == 1 and not view.yielded and same(view.slots[0], offset)


@register_impls
@dataclass
class CompiledFunctions(JxFunctions):
    """The jx ops traced into one kernel over the arena (`arena`), each value at its planned place."""

    layouts: dict[Operation, OpLayout] = field(default_factory=dict)
    arena: TracedArena = field(default_factory=TracedArena)
    wrong_rounds: Any = None
    """Whether a loop that says how many rounds it runs ran another number."""
    small_loops: bool = False
    """Whether each small loop is compiled into one kernel (`one_kernel`): on the CPU."""
    one_kernel_calls: int = 0
    """Loops traced into one kernel (`one_kernel`) in the kernel's last trace."""
    widened: dict[Operation, dict[int, Kind]] = field(default_factory=dict)
    """The kinds each loop or case was found to need, by position: kept from one trace of the
    kernel to the next (`Retrace`)."""
    _next: tuple = ()
    """The places the body of the loop being run computes the next round's values into."""
    _views: Sequence[MultiView] = ()
    """That loop's multi-views in the round being run."""
    _state: tuple = ()
    """Where that loop's carried values are in the round being run."""

    def layout(self, op: Operation) -> OpLayout:
        return op_layout(op, self.layouts)

    def learned(self, owner: Operation | None, guessed: list[Kind]) -> list[Kind]:
        """The kinds `owner` carries: those `guessed`, wider where a trace of it found them too narrow."""
        return [self.widened.get(owner, {}).get(position, kind) for position, kind in enumerate(guessed)]

    def learn(self, owner: Operation, found: Widen, kinds: list[Kind]) -> None:
        """Widen `kinds`, those of `owner`, as `found` says, and keep that for later traces; or raise
        `found` on, where it is another op's."""
        if found.owner is not owner:
            raise found
        kinds[found.position] = self.widened.setdefault(owner, {})[found.position] = found.kind

    @property
    def threaded(self) -> tuple:
        """What every op may update, threaded through loops and branches."""
        return self.arena.bytes, self.arena.copied, self.wrong_rounds, self.arena.base

    @threaded.setter
    def threaded(self, values: tuple) -> None:
        self.arena.bytes, self.arena.copied, self.wrong_rounds, self.arena.base = values

    def encode(self, value, kind: Kind, layout: Layout, owner: Operation, position: int, carried=None):
        """`value` as a loop or branch carries it (`kind`); raises `Widen` where it cannot be. A value
        in the arena carried as `Either` hands on the array the `carried` one held (a loop's round
        passes it through unchanged, which XLA neither copies nor computes every round)."""
        have = kind_of(value)
        if have == kind == Kind.AT:
            return At(int32(value.offset))
        if have == kind == Kind.VALUE:
            return value
        if kind != Kind.EITHER:
            raise Widen(owner, position, Kind.EITHER)
        if isinstance(value, At):
            unused = carried.value if isinstance(carried, Either) else unread_zeros(layout)
            return Either(jnp.bool_(True), int32(value.offset), unused)
        if isinstance(value, Either):
            return Either(jnp.asarray(value.inside, jnp.bool_), int32(value.offset), value.value)
        return Either(jnp.bool_(False), jnp.int32(0), value)

    def switch(self, owner: Operation, index, branches: Sequence[Callable], layouts, kinds: list[Kind],
               last_writes: bool = False) -> tuple:
        """`lax.switch` semantics over branches that run in the arena and return located values, each
        result in the kind `kinds` gives (widened where a branch needs it).

        XLA orders the branches of one conditional as if each ran after the one before: where an
        early branch writes the arena in place and a later one reads it, it copies the whole arena.
        So unless the caller knows that only the last branch writes the arena (`last_writes`), branch
        `k` runs in a conditional of its own, `lax.cond(index == k, branch, nothing)`, which hands
        the arena and the results on to the next.

        `base` is then made of every result of each conditional (`read_all`), and on the CPU,
        after the last, it is read into a value of its own (`TracedArena.pin`): XLA would compute its chain of
        selects again in each later read of the arena, every depth of the chain a distinct fusion
        to compile (the scanned transformer training step: 289 distinct fusions, 233 so); on a GPU
        that read would be a kernel launch of its own, in a loop every round. XLA drops the
        results nothing reads, and the operands a branch no longer needs, cloning each branch it
        changes; the branch that changes nothing ends up cloned more often than the one that
        writes. XLA's copy removal visits computations in the order it made them, and where it
        came to the writing branch first, it kept a copy of the arena at the end of each branch
        (random programs 823 and 2369, and 4857 in a `relocate`, where only the last branch writes).

        Where a result is widened once a conditional of the chain is in the trace, that conditional
        would stay there, its effects and its update of the arena with it: the kernel is traced
        again from the start (`Retrace`)."""
        if len(branches) == 1:
            return branches[0]()
        index = jnp.clip(lax.convert_element_type(index, jnp.int32), 0, len(branches) - 1)
        start = self.threaded
        changed: set[int] = set()  # which of the counts in `threaded` a branch of the last conditional changed

        def traced(branch):
            def run(state):
                self.threaded = state[0]
                results = branch()
                changed.update(k for k in _COUNTS if self.threaded[k] is not state[0][k])
                if not last_writes:
                    self.arena.touch()
                # `base` and the index go on out of each branch where XLA cannot see them. Every later
                # write waits for the branches (its offset counts from that `base`), which XLA would
                # take off the arena where none writes it: a read of the arena that no later write
                # depends on (here the index, read where it lies, in each conditional's test as XLA
                # repeats a cheap read in each user) makes XLA copy the arena to keep the bytes it reads
                unseen = self.arena.base == UNSEEN
                self.arena.base = hidden(self.arena.base, unseen)
                return self.threaded, self.encode_all(owner, results, kinds, layouts), hidden(state[2], unseen)

            return run

        if last_writes:
            conditionals = [lambda state: lax.switch(index, [traced(b) for b in branches], state)]
        else:
            conditionals = [lambda state, k=k: lax.cond(state[2] == k, traced(branches[k]), lambda state: state, state)
                            for k in range(len(branches))]
        kinds = self.learned(owner, kinds)
        while True:
            bound = 0  # conditionals of the chain in the trace
            try:
                state = (start, tuple(placeholder(kind, layout) for kind, layout in zip(kinds, layouts)), index)
                for conditional in conditionals:
                    changed.clear()
                    threaded, results, handed = conditional(state)
                    # a count no branch changed is what it was: a constant stays one, which a call
                    # then need not read back
                    self.threaded = tuple(y if k in _COUNTS and k not in changed else x
                                          for k, (x, y) in enumerate(zip(threaded, state[0])))
                    bound += 1
                    # every result read, so that XLA keeps the conditional as it is (see above)
                    self.arena.base = read_all([*jax.tree.leaves(results), handed], self.arena.base)
                    state = (self.threaded, results, handed)
                self.threaded, results, _ = state
                if jax.default_backend() == "cpu":
                    self.arena.base = self.arena.pin(self.arena.base[None])[0]
                return results
            except Widen as found:
                self.learn(owner, found, kinds)
                if bound:
                    raise Retrace() from found
                self.threaded = start

    def where(self, place: Place | None):
        """The offset of a place in the round being run (None: outside the arena): a slot's, the next
        round's view of a carried position, or a toggle ring's further free slot (`#mem.next<k, n>`),
        chosen from where the carried values are, traced."""
        if isinstance(place, NextAttr):
            k = place.position.data
            if place.nth.data:
                view = self._views[k]
                return view.toggle((self._state[k], *(self._state[j] for j in view.holds)), TRACED, place.nth.data)
            return self._next[k]
        return None if place is None else place.offset.data

    # -- ops ------------------------------------------------------------------------------------

    @impl_callable(jx.FuncOp)
    def call_func(self, interpreter: Interpreter, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        self.arena.bytes, args = args[0], args[1:]
        # host constants until an op counts a copy or checks a round: then traced (`CompiledRun.interpret`)
        self.arena.copied, self.wrong_rounds = (np.uint32(0), np.uint32(0)), np.bool_(False)
        self.one_kernel_calls = 0
        self._next, self._views = (), ()
        results = super().call_func(interpreter, op, args)
        outputs = op.body.block.last_op.operands
        return tuple(self.arena.read(v, layout_of(o.type)) for v, o in zip(results, outputs))

    def arguments(self, op: jx.FuncOp, args: PythonValues) -> PythonValues:
        """Donated arguments (`mem.args`) are written at their slots as the kernel starts; the kernel
        donates them to XLA, which may free them or give their memory to an output."""
        args = super().arguments(op, args)
        donated = donated_slots(op)
        return replace(args, list(donated), [
            self.arena.write(args[k], layout_of(op.body.block.args[k].type), offset) for k, offset in donated.items()
        ])

    def apply(self, op: jx.PrimOp | jx.FusedOp, args: PythonValues) -> PythonValues:
        layout = self.layouts.get(op) or self.layout(op)
        places = layout.offsets or tuple(self.where(p) for p in layout.places)
        binding = self.binding(op)
        effect = isinstance(op, jx.PrimOp) and op.effect is not None
        if layout.outputs and not effect and bytes_free(layout.outputs):
            return tuple(jnp.zeros(out.shape, out.dtype) for out in layout.outputs)  # nothing to read or write
        if layout.view and (places[0] is None or isinstance(args[0], At) and same(args[0].offset, places[0])):
            source = args[0]
            if isinstance(source, At):
                return (source,)  # the operand's bytes, read as the result's type
            if isinstance(source, Either):
                return (Either(source.inside, source.offset, binding.bind(source.value)[0]),)
        window = self.window(op, args, places, layout)
        if window is not None:
            return window
        fenced = indexes(op)
        # an op that reads the arena and writes nothing into it (a callback, values kept outside, such
        # as outputs) hands nothing back that a later write would wait for, and XLA copies the arena
        # where a read of it is not ordered before a later write: every later write waits instead
        # (its offset counts from a `base` made of them) for a callback's operands, or for the
        # results, each computed once into a buffer of its own (`kept_outside`)
        unwritten = all(p is None for p in places) and any(isinstance(v, At | Either) for v in args)
        # where what it reads of the arena is smaller than its results (an update of a value kept
        # outside), those reads are pinned instead of the results: the update stays in place
        read_first = unwritten and not effect and _pins_reads(op, args, layout)
        operands = self.arena.read_operands(args, layout.inputs, fenced,
                                            pinned=effect or read_first or sum(p is not None for p in places) > 1)
        if effect:
            self.arena.base = read_all(operands, self.arena.base)
        elif read_first:  # the reads alone: a read of an operand kept outside would keep it from its update
            self.arena.base = read_all([x for x, v in zip(operands, args) if isinstance(v, At | Either)], self.arena.base)
        results = binding.bind(*operands)
        if unwritten and not effect and not read_first:
            results = self.kept_outside(op, results, layout.outputs)
        outside = not any(isinstance(v, At | Either) for v in args)
        return tuple(r if p is None else self.arena.write(r, out, p, spread=outside or spreads(op, k))
                     for k, (r, p, out) in enumerate(zip(results, places, layout.outputs)))

    def kept_outside(self, op: jx.PrimOp | jx.FusedOp, results: Sequence[Any], layouts: Sequence[Layout]) -> tuple:
        """Results computed from the arena and kept outside it, each in a buffer of its own that every
        later write waits for. XLA computes a matrix product or a convolution into a buffer of its
        own; any other result is pinned (`pinned_words`), which XLA computes once, reading the arena as
        it goes, where it would compute a cheap result again inside each of its users, after later
        writes (pinning the operands instead holds a copy of each until the op runs)."""
        if not (isinstance(op, jx.PrimOp) and op.primitive.data in PRODUCTS):
            results = tuple(self.arena.pin_value(r, out) for r, out in zip(results, layouts))
        self.arena.base = read_all(results, self.arena.base)
        return tuple(results)

    def window(self, op: Operation, args: PythonValues, places: Sequence[Any], layout) -> tuple | None:
        """A `dynamic_slice` of a value in the arena, or a `dynamic_update_slice` of one in place,
        whose window is one run of whole words: only the window is read or written, at the start
        the op would clamp to (`window_start`), where reading the whole value would copy it. In
        a scan, each round reads or writes one row of the stacked values. None for any other op."""
        if not (isinstance(op, jx.PrimOp) and op.primitive.data in WINDOWED and isinstance(args[0], At)):
            return None
        whole, source = layout.inputs[0], args[0].offset
        width, element = self.arena.word.itemsize, whole.stored_dtype.itemsize
        if whole.key_impl is not None or whole.dtype.kind == "c" or element % width:
            return None
        reads = op.primitive.data == "dynamic_slice"
        window = layout.outputs[0] if reads else layout.inputs[1]
        sizes = self.binding(op).params["slice_sizes"] if reads else window.shape
        nbytes = math.prod(sizes) * element
        if len(sizes) != len(whole.shape) or not contiguous(whole.shape, sizes) or nbytes < 2 * width:
            return None
        if not reads:
            if places[0] is None or isinstance(source, int) and isinstance(places[0], int) and source != places[0]:
                return None  # out of place in every round: the op reads the whole value
            if not same(source, places[0]):  # a loop's first round reads its init operand elsewhere
                if jax.default_backend() != "cpu":
                    return None  # see `relocate`
                self.relocate(source, places[0], whole)
        operands = self.arena.read_operands(args[1:], layout.inputs[1:], False, False)
        start = plus(self.arena.base, over(source if reads else places[0], width))
        if (within := window_start(whole.shape, sizes, operands[-len(sizes):])) is not None:
            start = lax.add(start, lax.mul(within, np.int32(element // width)))
        if reads:
            self.arena.accesses += 1
            words = slice_words(self.arena.bytes, start, nbytes // width)
            if places[0] is None:  # kept outside: later writes wait for the read, as in `apply`
                words = self.arena.pin(words)
                self.arena.base = read_all([words], self.arena.base)
            value = from_words(words, window)
            return (value if places[0] is None else self.arena.write(value, window, places[0], moved=True),)
        moved = isinstance(args[1], At | Either)
        self.arena.put(to_words(operands[0], window, self.arena.word), start, spread=not moved, moved=moved)
        return (At(places[0]),)

    def relocate(self, source, place, layout: Layout) -> None:
        """The value of `layout` at byte `source` copied to `place` in a round where they differ,
        as a loop's first round reads its init operand where a later round's value lies in the
        loop's own slot: a `switch` over all that ops thread (a `lax.cond` over the arena alone,
        with its offsets computed outside the branches, made XLA copy the arena). On the CPU only:
        XLA's GPU runtime reads a conditional's predicate back to the host to choose the branch, a
        round trip each round that costs more than the device's copy of the value."""
        width = self.arena.word.itemsize

        def copy() -> tuple:
            self.arena.put(self.arena.words(source, layout.nbytes), plus(self.arena.base, over(place, width)), spread=False, moved=True)
            return ()

        self.switch(None, lax.convert_element_type(source != place, jnp.int32), [lambda: (), copy], [], [], last_writes=True)

    @impl(jx.CaseOp)
    def run_case(self, interpreter: Interpreter, op: jx.CaseOp, args: PythonValues) -> PythonValues:
        layout = self.layout(op)
        index = lax.convert_element_type(self.arena.read(args[0], layout.inputs[0]), jnp.int32)
        phis = op.attributes.get("mem.phi")
        views = [tuple(p.get_values()) for p in phis.data] if phis is not None else [()] * len(op.results)
        places = [self.where(p) for p in layout.places]

        def branch(k: int) -> Callable:
            def run() -> tuple:
                block = op.branches[k].block
                yielded = self.run_block(interpreter, block, ())
                moved = [j for j, place in enumerate(places) if place is not None and k not in views[j]]
                results = replace(yielded, moved, self.arena.move(
                    [yielded[j] for j in moved], [layout.outputs[j] for j in moved], [places[j] for j in moved]
                ))
                results = replace(results, *twice(block, views, k, results))
                return tuple(
                    self.arena.copy_out(v, out) if place is None and k not in phi else v
                    for v, place, phi, out in zip(results, places, views, layout.outputs)
                )

            return run

        kinds = [Kind.AT if place is not None else Kind.VALUE for place in places]
        return self.switch(op, index, [branch(k) for k in range(len(op.branches))], layout.outputs, kinds)

    @impl(jx.WhileOp)
    def run_while(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        # a loop in the body of a loop that runs as its ops' kernels (`_views` set) runs so too: its
        # one-kernel call would be a call of its own every round (the library corpus's neural ODE:
        # 75 us a warm call with its inner loops one kernel each, 32 with none)
        if self.small_loops and not self.arena.in_one_kernel and not self._views and self.small(op):
            return self.one_kernel(lambda: self.loop(interpreter, op, args))
        return self.loop(interpreter, op, args)

    def one_kernel(self, run: Callable[[], tuple]) -> tuple:
        """What `run` returns, traced as one call that XLA's CPU backend compiles into one kernel
        (the call's `xla_cpu_small_call` attribute; `inlineable` keeps the call apart until then).

        That backend aborts the process on a parameter of such a call that nothing reads, as
        XLA's simplifications leave one wherever it sees the argument's value (a constant) or
        finds no use for it. So every argument but the arena reaches the call through a `select`
        on `base` (XLA cannot see its value), and the call reads every parameter (`read_all`).
        Where that `select` would copy more than `HIDDEN_BYTES`, the loop runs as its ops' kernels.

        What is threaded and known as the kernel is traced (no bytes copied so far, no wrong round)
        stays out of the call where the loop leaves it so, known after it too: the call would take
        and hand back each as a parameter (two equal ones, which XLA made one, aborted the process:
        random program 4), and the kernel's status would be read back after every call."""
        threaded, structure = jax.tree.flatten(self.threaded)
        known_before = {k: x for k, x in enumerate(threaded) if k and not isinstance(x, jax.core.Tracer)}
        known_after: dict[int, Any] = {}
        touched = False

        def call(taken):
            nonlocal touched
            taken = iter(taken)
            leaves = [known_before[k] if k in known_before else next(taken) for k in range(len(threaded))]
            self.threaded, self.arena.in_one_kernel = jax.tree.unflatten(structure, leaves), True
            accesses = self.arena.accesses
            try:
                results, after = run(), jax.tree.leaves(self.threaded)
            finally:
                self.arena.in_one_kernel = False
            touched = self.arena.accesses > accesses
            known_after.update((k, x) for k, x in enumerate(after) if k in known_before and not isinstance(x, jax.core.Tracer))
            return results, [x for k, x in enumerate(after) if k not in known_after]

        start = [x for k, x in enumerate(threaded) if k not in known_before]  # the arena first, `base` last
        unseen = self.arena.base == UNSEEN  # False, where XLA cannot see it
        traced, shape = jax.make_jaxpr(call, return_shape=True)(start)
        handed_back = len(threaded) - len(known_after)  # the call's last outputs: the arena, ..., `base`
        # the program's float scalars are constants of the call, which XLA folds into its one kernel:
        # each taken through a `select` would be a fusion of its own outside the call, distinct by
        # its value. Integers and booleans stay arguments: one XLA sees may fix a loop's trip count
        # or a branch, and a loop or branch it removes hands the arena on, which it then copies
        # (random program 604, a `fori_loop` of `x * 0` rounds)
        known = [jnp.shape(c) == () and jnp.issubdtype(jnp.result_type(c), jnp.floating) and not isinstance(c, jax.core.Tracer)
                 for c in traced.consts]
        taken = [c for c, k in zip(traced.consts, known) if not k]
        outside = [*start[1:], *taken]  # what the call takes besides the arena
        if all(map(hideable, outside)):
            # what it takes in one array of each dtype: one `select` each outside the call, where one
            # for each value was a fusion each, run at every call (a diffrax solver's twenty)
            blobs, unpack = packed(outside)
            arena = start[0]

            def kernel(*inputs):
                # a loop that reads and writes no byte of the arena (its values all scalars, outside
                # it) takes no arena: a parameter of the call it did not read would abort the process
                inputs = [*inputs[:1], *unpack(inputs[1:])] if touched else [jnp.zeros(arena.shape, arena.dtype), *unpack(inputs)]
                base = len(start) - 1  # `threaded` ends with `base`
                inputs[base] = read_all(inputs, inputs[base])
                values = iter(inputs[len(start):])
                consts = [with_weak_type(np.asarray(c) if k else next(values), jax.typeof(c)) for c, k in zip(traced.consts, known)]
                outputs = jax.core.eval_jaxpr(traced.jaxpr, consts, *inputs[:len(start)])
                return read_everywhere(outputs, handed_back, self.arena.word, touched)

            outputs = jax.jit(kernel, inline=False)(*[arena][:touched], *(hidden(x, unseen) for x in blobs))
            outputs = set_xla_metadata(outputs, **ONE_KERNEL_CALL)
            if not touched:  # the arena handed on around the call
                at = len(outputs) - handed_back + 1
                outputs = [*outputs[:at], arena, *outputs[at:]]
            self.one_kernel_calls += 1
        else:
            outputs = jax.core.eval_jaxpr(traced.jaxpr, traced.consts, *start)
        results, after = jax.tree.unflatten(jax.tree.structure(shape), outputs)
        after = iter(after)
        self.threaded = jax.tree.unflatten(structure, [known_after[k] if k in known_after else next(after) for k in range(len(threaded))])
        return results

    def small(self, op: jx.WhileOp) -> bool:
        """Whether a round of the loop reads and writes at most `SMALL_LOOP_BYTES`, in ops that XLA's
        CPU backend can compile into one kernel (`compiles_into_one_kernel`)."""
        total = 0
        for inner in op.walk():
            if isinstance(inner, jx.PrimOp):
                if not compiles_into_one_kernel(inner, self.binding(inner).params):
                    return False
                total += sum(layout_of(v.type).nbytes for v in (*inner.operands, *inner.results))
        return total <= SMALL_LOOP_BYTES

    def loop(self, interpreter: Interpreter, op: jx.WhileOp, args: PythonValues) -> PythonValues:
        layouts = self.layout(op).outputs
        views = [self.resolved(v) for v in op.attributes["mem.views"].data]
        # a ring whose first slot is the init operand's memory reads it where it lies in round 0
        # (`ArenaFunctions.run_while`)
        state = self.arrive(views, 0, args, args, layouts)
        # a loop that says it runs several rounds counts them, where XLA sees its trip count, and
        # carries whether the program's own condition agreed in every round, unless its ops prove
        # it does (then its condition does not run); another carries that condition (counting a
        # loop of one round made XLA copy the arena in random programs 0, 5 and 10)
        count = op.rounds.data if op.rounds is not None and op.rounds.data > 1 else None
        proven = said_rounds_proven(op, self.table)
        unchecked = count is not None and proven and not jx.has_effect(op.cond)
        go = np.bool_(True) if unchecked else self.test(interpreter, op, state)
        kinds = self.learned(op, [joined(kind_of(v), carried_kind(view, args)) for v, view in zip(state, views)])

        def flag(go, round_, before=True):
            return go if count is None else before if unchecked else before & (go == (round_ < count))

        # a value at the same constant offset in the first round and after every round is read there
        # (`_Settled`), where the loop's state would carry the offset: XLA folds it into a constant
        # in each read, where the kernel takes its other offsets as arguments (`offsets_as_arguments`),
        # so each such read is a fusion of its own, and a read and an in-place write at offsets XLA
        # cannot tell equal are not fused (the read is a copy of its own). The plan foretells most:
        # a ring of one slot that the init operand lies in starts settled, so that a guess the
        # body confirms costs no second trace of it (nor of the loops inside it)
        settled: dict[int, int] = {k: first.offset for k, (first, view) in enumerate(zip(state, views))
                                   if isinstance(first, At) and settled_at(view, first.offset)}
        unsettled: set[int] = set()  # settled once, then found elsewhere after a round

        def at_settled(state: tuple) -> tuple:
            return tuple(At(settled[k]) if k in settled else v for k, v in enumerate(state))

        def body(carry):
            self.threaded, round_, before, state = carry
            state = at_settled(state)
            self.arena.base = self.arena.base & round_  # still 0, but no longer the same in every round
            following = self.step(interpreter, op, views, args, layouts, round_, state)
            constant = {k: v.offset for k, (v, first) in enumerate(zip(following, start_state)) if k not in settled and k not in unsettled
                        and isinstance(v, At) and isinstance(first, At) and same(first.offset, v.offset)}
            constant.update({k: None for k, offset in settled.items()
                             if not (isinstance(following[k], At) and same(following[k].offset, offset))})
            if constant:
                raise _Settled(op, constant)
            go = np.bool_(True) if unchecked else self.test(interpreter, op, following)
            return self.threaded, round_ + 1, flag(go, round_ + 1, before), self.encode_all(op, following, kinds, layouts, state)

        start, start_state = self.threaded, state
        while True:
            try:
                carry = (start, jnp.int32(0), flag(go, 0), self.encode_all(op, start_state, kinds, layouts))
                cond = (lambda c: c[2]) if count is None else (lambda c: c[1] < count)
                self.threaded, rounds, agreed, state = lax.while_loop(cond, body, carry)
                break
            except _Settled as found:
                if found.owner is not op:
                    raise
                for k, offset in found.offsets.items():
                    if offset is None:
                        del settled[k]
                        unsettled.add(k)
                    else:
                        settled[k] = offset
                self.threaded = start
            except Widen as found:
                self.learn(op, found, kinds)
                self.threaded = start
        state = at_settled(state)
        if proven:
            return state
        if count is not None:
            self.wrong_rounds = self.wrong_rounds | ~agreed
        elif op.rounds is not None:
            self.wrong_rounds = self.wrong_rounds | (rounds != op.rounds.data)
        if op.at_most is not None:
            self.wrong_rounds = self.wrong_rounds | (rounds > op.at_most.data)
        return state

    def encode_all(self, owner: Operation, values, kinds, layouts, carried=None) -> tuple:
        carried = carried or (None,) * len(values)
        return tuple(self.encode(v, kind, layout, owner, i, c)
                     for i, (v, kind, layout, c) in enumerate(zip(values, kinds, layouts, carried)))

    def resolved(self, views: ViewsAttr) -> MultiView:
        """A loop's multi-view in the round being run of the enclosing loop (`ViewsAttr.resolved`): a
        ring in its next view of a position lies where the enclosing body computes that value."""
        return views.resolved(lambda position: None if self._next[position] is None else
                              (self._next[position], self._views[position].size))

    def arrive(self, views: Sequence[MultiView], round_, inits, carried, layouts) -> tuple:
        """Where each carried value is in round `round_` (`ArenaFunctions._round` and `_outside`): an
        init operand, a ring slot, the value yielded, or that value read out of the arena. A traced
        round is at least 1."""
        state = []
        for view, value, layout in zip(views, carried, layouts):
            firsts = [inits[i] for i in view.initial]
            if isinstance(round_, int):
                if (first := view.first_read(round_, TRACED)) < len(firsts):
                    value = firsts[first]
            elif view.rotates:  # the init operands in turn
                value = self.pick(firsts, view.first_read(round_, TRACED), layout)
            elif len(firsts) > 1:  # init operands first, for as many rounds as they are
                value = self.pick([*firsts, value], view.first_read(round_, TRACED), layout)
            if view.outside and isinstance(value, At | Either):
                value = self.arena.copy_out(value, layout)  # kept outside the arena
            state.append(value)
        return tuple(state)

    def pick(self, candidates: list, index, layout: Layout):
        """The candidate at a traced index."""
        kinds = {kind_of(c) for c in candidates}
        if kinds == {Kind.AT}:
            return At(entry([c.offset for c in candidates], index))
        if kinds == {Kind.VALUE}:
            return lax.select_n(index, *candidates) if len(candidates) > 1 else candidates[0]
        wide = [self.encode(c, Kind.EITHER, layout, None, 0) for c in candidates]
        outside = [w.value for c, w in zip(candidates, wide) if not isinstance(c, At)]
        value = outside[0] if len(outside) == 1 else jax.tree.map(lambda *v: lax.select_n(index, *v), *[w.value for w in wide])
        return Either(entry([w.inside for w in wide], index), entry([w.offset for w in wide], index), value)

    def test(self, interpreter: Interpreter, op: jx.WhileOp, state: tuple) -> jax.Array:
        """The loop's condition on `state`, as a traced bool."""
        value = self.run_block(interpreter, op.cond.block, state)[0]
        return jnp.asarray(self.arena.read(value, layout_of(op.cond.block.last_op.operands[0].type)), jnp.bool_)

    def step(self, interpreter: Interpreter, op: jx.WhileOp, views, inits, layouts, round_, state) -> tuple:
        """Run the body in (traced) round `round_`; where each value is in the next round."""
        outer = self._next, self._views, self._state
        self._views, self._state = views, state
        self._next = tuple(v.toggle((s, *(state[j] for j in v.holds)), TRACED) if v.toggles else v.slot(round_ + 1, TRACED)
                           for v, s in zip(views, state))
        try:
            yielded = self.run_block(interpreter, op.body.block, state)
            ring = [k for k, v in enumerate(views) if v.slots and not v.yielded]
            due = {k: views[k].past_initial(round_ + 1, TRACED) for k in ring}
            now = [k for k in ring if due[k] is True]
            # values due in their slots move together, every source read before any is written over
            carried = replace(yielded, now, self.arena.move(
                [yielded[k] for k in now], [layouts[k] for k in now], [self._next[k] for k in now]
            ))
            later = [k for k in ring if due[k] is not True]
            carried = replace(carried, later, [self.place(carried[k], layouts[k], self._next[k], due[k]) for k in later])
        finally:
            self._next, self._views, self._state = outer
        return self.arrive(views, round_ + 1, inits, carried, layouts)

    def place(self, value, layout: Layout, offset, due):
        """`value` moved to a ring slot where the next round reads that slot (`due`; traced where the
        next round may still read an init operand)."""
        if isinstance(value, At) and same(value.offset, offset):
            return value
        if isinstance(due, bool):
            return self.arena.move([value], [layout], [offset])[0]
        # rounds that still read init operands read no slot: the value is not moved then
        return self.switch(None, lax.convert_element_type(due, jnp.int32),
                           [lambda: (value,), lambda: self.arena.move([value], [layout], [offset])], [layout], [Kind.EITHER],
                           last_writes=True)[0]


_COUNTS = (1, 2)
"""The positions in `CompiledFunctions.threaded` of what the kernel counts for its status: the bytes
copied and the wrong rounds."""

WINDOWED = frozenset({"dynamic_slice", "dynamic_update_slice"})
"""Primitives that read or write a window of a value in the arena (`CompiledFunctions.window`)."""
