"""`jaxalloc.planned`: the user's entry point, shaped like `jax.jit`.

Like `jax.jit`, a planned function traces once per input signature (pytree structure,
shapes, dtypes, weak types) and caches what it built for that signature. Its options are checked
once, into a `PlannedOptions`; its mode is a `ModeRunner`, which says which plan it runs and runs it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import gc
import math
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

import jax
import numpy as np
from jax._src import api_util, core
from jax._src.array import ArrayImpl
from jax._src.interpreters import partial_eval as pe
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.interpreter import PythonValues

from jaxalloc.allocators import get_allocator
from jaxalloc.checks.sanitizer import CheckedFunctions
from jaxalloc.errors import JaxallocError, UnsupportedProgramError, check_alignment, first_line
from jaxalloc.execution.compiled import CompiledFunctions, CompiledRun, cache
from jaxalloc.execution.interpreter import (
    ArenaFunctions, JxFunctions, LiveBytesSampler, Schedules, delete, make_interpreter, with_weak_type,
)
from jaxalloc.frontend.convert import Converted, convert
from jaxalloc.passes.canonicalize import CanonicalizePass, canonicalize
from jaxalloc.passes.dead_code import DeadCodePass
from jaxalloc.passes.fusion import FusePass
from jaxalloc.passes.schedule import SchedulePass
from jaxalloc import planned_call
from jaxalloc.planned_call import DEFAULT_PASSES, Options
from jaxalloc.planning.assignment.ir import leaves_nothing_to_place
from jaxalloc.planning.plan import Plan, make_plan
from jaxalloc.xla.memory import CallMemory

PASSES = {"jx-dce": DeadCodePass, "jx-canonicalize": CanonicalizePass, "jx-fuse": FusePass, "jx-schedule": SchedulePass}
"""The jx passes `planned(f, passes=...)` may run on the module before it is planned, by name."""

def _run_pass(name: str, converted: Converted) -> None:
    """Run the jx pass `name` on a converted module; `jx-canonicalize` binds primitives with new
    parameters, so it gets the side table to add them to; `jx-fuse` fuses as XLA does on the backend
    the function runs on (its library graphs on the CPU)."""
    if PASSES[name] is CanonicalizePass:
        canonicalize(converted.module, converted.table)
    elif PASSES[name] is FusePass:
        FusePass(library=jax.default_backend() == "cpu").apply(Context(), converted.module)
    else:
        PASSES[name]().apply(Context(), converted.module)


_DATA_DEPENDENT = (
    jax.errors.ConcretizationTypeError,
    jax.errors.NonConcreteBooleanIndexError,
    jax.errors.TracerArrayConversionError,
    jax.errors.TracerBoolConversionError,
    jax.errors.TracerIntegerConversionError,
)


ARENA_CHOICES = ("smaller", "always")
"""What a compiled call runs (`planned(f, arena=...)`): `"smaller"`, the plan's arena kernel or, where
a call of it would hold more, the module on XLA's own buffers (`CompiledRun.smaller`); `"always"`,
the plan's arena kernel."""


@dataclass(frozen=True)
class PlannedOptions(Options):
    """Every option of `planned`, checked once, as it is made: a bad one is a one-line error naming
    it. The static and donated arguments are as `jax.jit` takes them until `for_function` completes
    them from the function's signature (numbers from names and back), as tuples."""

    static_argnums: int | Sequence[int] | None = None
    static_argnames: str | Iterable[str] | None = None
    donate_argnums: int | Sequence[int] | None = None
    donate_argnames: str | Iterable[str] | None = None
    measure_memory: bool = False
    keep_arena: bool = False

    def __post_init__(self) -> None:
        if self.mode not in RUNNERS:
            raise ValueError(f"unknown mode {self.mode!r}; choose one of {', '.join(MODES)}")
        passes = (self.passes,) if isinstance(self.passes, str) else tuple(self.passes)
        for name in passes:
            if name not in PASSES:
                raise ValueError(f"unknown pass {name!r}; choose from {', '.join(PASSES)}")
        get_allocator(self.allocator)
        if self.arena not in ARENA_CHOICES:
            raise JaxallocError(f"unknown arena choice {self.arena!r}; choose one of {', '.join(map(repr, ARENA_CHOICES))}")
        for flag in ("measure_memory", "keep_arena"):
            if not isinstance(getattr(self, flag), bool):
                raise JaxallocError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        checked = dict(
            passes=passes,
            alignment=check_alignment(self.alignment),
            static_argnums=_numbers("static_argnums", self.static_argnums),
            static_argnames=_names("static_argnames", self.static_argnames),
            donate_argnums=_numbers("donate_argnums", self.donate_argnums),
            donate_argnames=_names("donate_argnames", self.donate_argnames),
        )
        for name, value in checked.items():
            object.__setattr__(self, name, value)

    def for_function(self, fun: Callable) -> PlannedOptions:
        """These options with the static and donated arguments completed from `fun`'s signature, as
        `jax.jit` completes them; one that does not fit it is a one-line `JaxallocError`."""
        name = getattr(fun, "__name__", "fun")
        if both := set(self.static_argnums or ()) & set(self.donate_argnums or ()):
            raise JaxallocError(
                f"planned({name}): argument {min(both)} is both static and donated; a static argument is a Python "
                "value, not an array, and cannot be donated"
            )
        try:
            donate_argnums, donate_argnames, static_argnums, static_argnames = api_util.resolve_argnums(
                fun, api_util.fun_signature(fun), self.donate_argnums, self.donate_argnames,
                self.static_argnums, self.static_argnames,
            )
        except (TypeError, ValueError) as e:
            words = first_line(e).split(": ", 1)[1].replace("Jitted function", name)
            raise JaxallocError(f"planned({name}): {words}") from None
        return dataclasses.replace(self, static_argnums=static_argnums, static_argnames=static_argnames,
                                   donate_argnums=donate_argnums, donate_argnames=donate_argnames)

    @property
    def program_options(self) -> Options:
        """What every program a transformation derives from the function shares (`planned_call`)."""
        return Options(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Options)})


def _numbers(option: str, value) -> tuple[int, ...] | None:
    """An `*_argnums` option as a tuple (None stays None: `jax.jit` then completes it from the names)."""
    if value is None:
        return None
    try:
        return api_util._ensure_index_tuple(value)
    except TypeError:
        raise JaxallocError(f"{option} must be an int or a sequence of ints, got {value!r}") from None


def _names(option: str, value) -> tuple[str, ...] | None:
    """An `*_argnames` option as a tuple (None stays None: `jax.jit` then completes it from the numbers)."""
    if value is None:
        return None
    if isinstance(value, str):
        return (value,)
    names = tuple(value) if isinstance(value, Iterable) else ()
    if not isinstance(value, Iterable) or not all(isinstance(n, str) for n in names):
        raise JaxallocError(f"{option} must be a str or a sequence of strs, got {value!r}")
    return names


@dataclass(frozen=True)
class RunStats:
    """What the last call of a planned function did."""

    mode: str
    ops: int
    """Ops interpreted, the ops of every loop round counted (0 in compiled mode, which runs one kernel)."""
    seconds: float
    arena_bytes: int = 0
    """Size of the arena the run used (0 in eager mode)."""
    copied_bytes: int = 0
    """Bytes copied between loop rounds or out of case branches because the plan did not place a
    value where it is read next (0 for a plan with multi-views everywhere)."""
    live_bytes_before: int | None = None
    peak_live_bytes: int | None = None
    """With `measure_memory=True`: bytes in use before the call and at most during it, sampled after
    every op, or after the kernel in compiled mode (the device's `memory_stats()` where it reports
    them, else `jax.live_arrays()`)."""
    phases: dict[str, float] = field(default_factory=dict)
    """Seconds of the work done for this call's signature and mode since a call last reported it, by
    phase (`Phases`): tracing, converting, each pass, planning and, in compiled mode, the kernel's
    trace, lowering and XLA's compile. All of a first call's own work (`.lower()` or `.plan()`
    before it did the trace and passes), empty for a call that found it done; `seconds` counts
    neither the trace nor the passes."""
    output_bytes: int = 0
    """Bytes of the outputs the call returned, held beside the arena as it ends."""
    held_bytes: int = 0
    """Bytes the function holds between calls: its arena where it keeps it (`keep_arena=True`)."""
    kernel_temp_bytes: int | None = None
    """With `measure_memory=True` in compiled mode: the kernel's own temp memory beside the arena,
    where XLA computes what it cannot compute in place in the arena (`memory_analysis()`)."""
    aliased_bytes: int = 0
    """With `measure_memory=True` in compiled mode: the output bytes XLA computed in donated
    arguments' memory, no new memory."""
    xla_buffers: bool = False
    """Whether the compiled call ran the module on XLA's own buffers, with no arena: with
    `arena="smaller"` (the default), where a call of the plan's kernel would hold more."""

    @property
    def call_bytes(self) -> int | None:
        """What the call held at most, by its parts: the arena, the kernel's own temp and the outputs
        but those computed in donated arguments' memory (None where the kernel's temp was not measured)."""
        if self.mode == "compiled" and self.kernel_temp_bytes is None:
            return None
        return self.arena_bytes + (self.kernel_temp_bytes or 0) + self.output_bytes - self.aliased_bytes


class Phases:
    """A stopwatch of the phases of a first call: where its time goes, which `jax.jit` only tells
    through `jax.monitoring`. The kernel's lowering and XLA's compile are read off JAX's own
    events, the kernel's trace is what remains of its first call."""

    LOWER, COMPILE = "/jax/core/compile/jaxpr_to_mlir_module_duration", "/jax/core/compile/backend_compile_duration"

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextlib.contextmanager
    def timed(self, name: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] = self.seconds.get(name, 0.0) + time.perf_counter() - start

    @contextlib.contextmanager
    def kernel(self, rest: str = "kernel trace"):
        """A kernel's first call, its lowering and compile apart from the rest: its trace, or, for a
        kernel from the persistent cache (`rest="call"`), tracing the call of it and running it. The
        lowerings and compiles of other threads (`CompiledRun.smaller`'s), and the phases timed
        inside it, are not the kernel's."""
        events = {self.LOWER: 0.0, self.COMPILE: 0.0}
        thread, before = threading.get_ident(), sum(self.seconds.values())

        def heard(event: str, seconds: float, **_) -> None:
            if event in events and threading.get_ident() == thread:
                events[event] += seconds

        jax.monitoring.register_event_duration_secs_listener(heard)
        start = time.perf_counter()
        try:
            yield
        finally:
            jax.monitoring.unregister_event_duration_listener(heard)
            whole = time.perf_counter() - start - (sum(self.seconds.values()) - before)
            for name, seconds in ((rest, whole - events[self.LOWER] - events[self.COMPILE]),
                                  ("lower", events[self.LOWER]), ("XLA compile", events[self.COMPILE])):
                self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def take(self) -> dict[str, float]:
        """The phases timed so far, which the next call will not report again."""
        taken, self.seconds = self.seconds, {}
        return taken


_ARGUMENT = re.compile(r"depends on the value of the argument (\w+)")


class _OpCounter:
    """Interpreter listener counting the ops run."""

    def __init__(self):
        self.ops = 0

    def will_interpret_op(self, op, args) -> None:
        self.ops += 1

    def did_interpret_op(self, op, results) -> None:
        pass


@dataclass(frozen=True)
class PlanOptions:
    """Which values a plan leaves outside the arena (`make_plan`'s options)."""

    include_outputs: bool = False
    products_outside: bool = False
    small_outside: bool = False


KERNEL_PLAN = PlanOptions(products_outside=True, small_outside=True)
"""The plan the compiled kernel runs: the outputs outside the arena, where the caller receives them
(a loop's result as the buffer XLA's loop carries it in); the values of matrix products and
convolutions in XLA's own buffers, where XLA computes such ops anyway, and every small value, which XLA
fuses into the ops that read it (`plan_function`)."""

WITH_OUTPUTS = PlanOptions(include_outputs=True)
"""Every output in the arena too: the plan that compares with XLA's `temp + output - alias`."""


@dataclass
class _Traced:
    """What one input signature traced to, its plans, and what runs them."""

    closed_jaxpr: core.ClosedJaxpr
    out_tree: Any
    source: Converted | _Lowering
    """The jx module after the passes, or what converts the jaxpr and runs the passes (`converted`)."""
    schedules: Schedules = field(default_factory=Schedules)
    plans: dict[tuple[str, int], tuple[Plan, Schedules, dict]] = field(default_factory=dict)
    """Per (allocator, alignment): the plan the op-by-op modes run, and the schedules and op layouts
    every run of it shares."""
    kernels: dict[tuple[tuple[str, int], bool, bool], CompiledRun] = field(default_factory=dict)
    """Per (allocator, alignment), whether inline in an enclosing computation and whether it keeps
    its arena between calls: the plan compiled into one kernel (`CompiledRunner`)."""
    donated: tuple[int, ...] = ()
    """The flat arguments donated (`donate_argnums` / `donate_argnames`), planned in the arena."""
    phases: Phases = field(default_factory=Phases)
    """The work of calls so far that no call has reported yet (`RunStats.phases`)."""
    closed_over: tuple = ()
    """Values of an enclosing trace the function closes over: JAX makes them the program's first
    arguments."""
    made: dict[tuple[tuple[str, int], PlanOptions], Plan] = field(default_factory=dict)
    """The plans made so far, per (allocator, alignment) and `PlanOptions` (`plan`)."""
    cache_keys: dict[tuple[tuple[str, int], bool, bool], str | None] = field(default_factory=dict)
    """Per kernel variant (`kernels`): its key in the persistent kernel cache, None where it has none."""
    output_bytes: int | None = None
    """The bytes of a call's outputs, the same at every call of the signature: summed at the first
    (`RunStats.output_bytes`)."""
    warm: Callable[[Sequence], tuple] | None = None
    """What a call runs once nothing is left to do for the signature but its kernel (`ModeRunner.warm`)."""
    warm_stats: tuple = ()
    """What each such call reports, in `RunStats`'s fields after `seconds`: the same at every call."""
    _lowered: Converted | None = None
    _converted: Converted | None = None
    _deleted: tuple[int, ...] | None = None

    @property
    def lowered(self) -> Converted:
        """The jx module as converted, made on first use; the passes, once they run, change it in
        place (`converted`). Its function's name and its table of constants stay."""
        if self._lowered is None:
            if isinstance(self.source, Converted):
                self._lowered = self.source
            else:
                with _collector_paused(), core.eval_context():
                    self._lowered = self.source.convert()
        return self._lowered

    @property
    def converted(self) -> Converted:
        """The jx module after the passes, made on first use: a call that finds its kernel in the
        persistent cache, or whose kernel plans nothing in the arena (`_plan_before_passes`), never
        needs it."""
        if self._converted is None:
            lowered = self.lowered
            if isinstance(self.source, Converted):
                self._converted = lowered
            else:
                with _collector_paused(), core.eval_context():
                    self._converted = self.source.passes(lowered)
        return self._converted

    @property
    def deleted(self) -> tuple[int, ...]:
        """The donated arguments a call deletes: those `jax.jit` would (`_deleted_by_jit`), found on first use."""
        if self._deleted is None:
            with core.eval_context():
                self._deleted = _deleted_by_jit(self, self.donated)
        return self._deleted

    @deleted.setter
    def deleted(self, deleted: tuple[int, ...]) -> None:
        self._deleted = deleted

    def plan(self, key: tuple[str, int], options: PlanOptions) -> Plan:
        """The plan for `key` (allocator, alignment) with these options, made once."""
        if (key, options) not in self.made:
            plan = self._plan_before_passes(key, options)
            if plan is None:
                module = self.converted.module  # the passes, timed apart
                with self.phases.timed("plan"):
                    plan = make_plan(module, *key, **dataclasses.asdict(options), donated=self.donated)
            self.made[key, options] = plan
        return self.made[key, options]

    def _plan_before_passes(self, key: tuple[str, int], options: PlanOptions) -> Plan | None:
        """The plan of the module before the passes, where it places nothing in the arena: the passes
        only ever make an arena smaller, so a program whose every value XLA keeps (small ones,
        products, outputs: `leaves_nothing_to_place`) skips them, and its first call their time.
        None where the passes have run already, the plan holds the outputs, or it places something."""
        if self._converted is not None or options.include_outputs or not leaves_nothing_to_place(self.lowered.module):
            return None
        with self.phases.timed("plan"):
            plan = make_plan(self.lowered.module, *key, **dataclasses.asdict(options), donated=self.donated)
        return plan if not plan.arena_bytes else None

    def interpret(self, module: ModuleOp, functions: JxFunctions, flat_args, listeners) -> PythonValues:
        """The outputs of `module` run op by op on flat arguments with `functions`."""
        interpreter = make_interpreter(module, functions, listeners)
        outputs = interpreter.call_op(self.converted.func.sym_name.data, tuple(flat_args))
        outputs = tuple(map(with_weak_type, outputs, self.closed_jaxpr.out_avals))
        self.delete_donated(flat_args, outputs)
        return outputs

    def delete_donated(self, flat_args, outputs) -> None:
        """The donated arrays `jax.jit` deletes, deleted, but one returned as it is (the caller's result)."""
        for k in self.deleted:
            if not any(o is flat_args[k] for o in outputs):
                delete(flat_args[k])


class _Lowering(NamedTuple):
    """How a traced signature becomes its jx module: converted, then the passes run on it in place."""

    convert: Callable[[], Converted]
    passes: Callable[[Converted], Converted]


class _Ran(NamedTuple):
    """What one run of a mode gives back, for `RunStats`."""

    outputs: PythonValues
    arena_bytes: int = 0
    copied_bytes: int = 0
    held_bytes: int = 0
    xla_buffers: bool = False


class ModeRunner:
    """How a planned function runs in one mode, and which plan it runs (`planned(f, mode=...)`).

    Every mode with an arena runs the compiled kernel's plan (`KERNEL_PLAN`), so the sanitizer
    checks the very plan compiled calls run; the op-by-op runs hold the values it leaves outside the
    arena as plain arrays."""

    mode: ClassVar[str]
    plan_options: PlanOptions = KERNEL_PLAN
    """The plan this mode runs: what `Planned.plan()` gives (another for one runner, where a test
    would run programs of small values with the arena's rings and views; `differential.check_program`)."""

    def __init__(self, options: PlannedOptions):
        self.options = options
        self.key = (options.allocator, options.alignment)

    def plan(self, traced: _Traced, include_outputs: bool = False) -> Plan:
        """The plan this mode runs; with `include_outputs`, the plan of every output in the arena too."""
        return traced.plan(self.key, WITH_OUTPUTS if include_outputs else self.plan_options)

    def run(self, traced: _Traced, flat_args, listeners) -> _Ran:
        """Run on concrete flat arguments; `listeners` hear of every op interpreted."""
        raise NotImplementedError

    def measured(self, traced: _Traced, flat_args, sampler: LiveBytesSampler) -> tuple[int, int] | None:
        """After a run with `measure_memory=True`: the bytes of a kernel's own temp memory and of the
        outputs it computed in donated arguments' memory, where there is a kernel (the op-by-op runs
        sampled after every op)."""
        return None

    def warm(self, traced: _Traced) -> tuple[Callable[[Sequence], tuple], tuple] | None:
        """After a call: what later calls of `traced` run, and what each reports (`_Traced.warm`),
        where each finds the same and does nothing but run a kernel; else None."""
        return None

    def inline(self, program: _Program, flat_args) -> Sequence:
        """The outputs traced inside an enclosing computation (under `jax.jit`, in a loop's body)."""
        raise NotImplementedError


class EagerRunner(ModeRunner):
    """`mode="eager"`: the jx module on plain jax arrays, no arena: a reference run, and the way out
    where the checker gives up on a plan. It runs no plan; `Planned.plan()` gives the compiled one."""

    mode = "eager"

    def run(self, traced: _Traced, flat_args, listeners) -> _Ran:
        functions = JxFunctions(traced.converted.table, traced.schedules)
        return _Ran(traced.interpret(traced.converted.module, functions, flat_args, listeners))

    def inline(self, program: _Program, flat_args) -> Sequence:
        return core.jaxpr_as_fun(program.jaxpr)(*flat_args)


class ArenaRunner(ModeRunner):
    """`mode="arena"`: the plan run op by op from Python, each op a jitted kernel that reads its
    operands out of a `uint8` arena and writes its results back, so every op's effect on the arena
    can be seen; inside an enclosing computation, a host callback."""

    mode = "arena"
    functions: ClassVar[type[ArenaFunctions]] = ArenaFunctions

    def run(self, traced: _Traced, flat_args, listeners) -> _Ran:
        if self.key not in traced.plans:
            traced.plans[self.key] = (self.plan(traced), Schedules(), {})
        plan, schedules, layouts = traced.plans[self.key]
        functions = self.functions(traced.converted.table, schedules, layouts=layouts)
        outputs = traced.interpret(plan.module, functions, flat_args, listeners)
        return _Ran(outputs, plan.arena_bytes, functions.copied_bytes)

    def inline(self, program: _Program, flat_args) -> Sequence:
        return planned_call.host_callback(program.run, program.jaxpr)(*flat_args)


class CheckedRunner(ArenaRunner):
    """`mode="checked"`: the op-by-op arena with shadow memory: every read checks that its bytes still
    belong to the value it expects, else `jaxalloc.PlanViolation` (`checks/sanitizer.py`)."""

    mode = "checked"
    functions = CheckedFunctions


class CompiledRunner(ModeRunner):
    """`mode="compiled"`, the default: the plan as one jitted kernel, loops and branches included,
    every value read and written at its planned offset (`jaxalloc.execution.compiled`)."""

    mode = "compiled"

    def kernel(self, traced: _Traced, inline: bool = False) -> CompiledRun:
        """The kernel of the plan, built on first use. A kernel `inline` in an enclosing computation
        runs each loop as its ops' kernels: XLA's CPU backend cannot compile a loop into one kernel
        (`one_kernel`) inside a computation that is not the kernel's own."""
        variant = self._variant(inline)
        if variant not in traced.kernels and not self._load(traced, variant):
            plan = self.plan(traced)
            with traced.phases.timed("plan"):
                traced.kernels[variant] = self._built(traced, plan, variant, store=self.cache_key(traced, variant) is not None)
        return traced.kernels[variant]

    @staticmethod
    def _built(traced: _Traced, plan: Plan, variant, store: bool) -> CompiledRun:
        functions = CompiledFunctions(traced.lowered.table, Schedules(), layouts={})
        return CompiledRun(plan.module, traced.lowered.func.sym_name.data, plan.arena_bytes, functions, traced.deleted,
                           traced.closed_jaxpr.out_avals, small_loops=not variant[1], keep_arena=variant[2], store=store)

    def call_memory(self, traced: _Traced, flat_args, compiler_options: dict | None) -> CallMemory:
        """What a call holds, by its parts, from `memory_analysis()` of its kernel compiled with
        `compiler_options` (`flat_args` may be abstract): the kernel calls run where one is compiled,
        else one built apart, so that a later first call still traces, times and stores its own."""
        variant = self._variant(False)
        kernel = traced.kernels.get(variant)
        if kernel is None or kernel.kernel is None:
            kernel = self._compiled(self._built(traced, self.plan(traced), variant, store=False), flat_args)
        temp, aliased = kernel.memory_of(kernel.traced(flat_args).lower().compile(compiler_options=compiler_options))
        outputs = sum(math.prod(a.shape) * a.dtype.itemsize for a in traced.closed_jaxpr.out_avals)
        return CallMemory(kernel.arena_bytes, temp, outputs, aliased, kernel.xla_buffers)

    def _compiled(self, kernel: CompiledRun, flat_args, aside=contextlib.nullcontext) -> CompiledRun:
        """The plan's kernel compiled, or, with `arena="smaller"`, the module on XLA's own buffers where
        a call of that holds less (`CompiledRun.smaller`, `aside` timing what that costs)."""
        if self.options.arena == "smaller":
            return kernel.smaller(flat_args, aside)
        kernel.compile(flat_args)
        return kernel

    def cache_key(self, traced: _Traced, variant) -> str | None:
        """The kernel's key in the persistent kernel cache (`jaxalloc.config`), None where the cache is
        off or the kernel is not one to keep: one inline in an enclosing computation, one of a function
        that closes over an enclosing trace's values or has effects."""
        if variant not in traced.cache_keys:
            keep = cache.cache_dir() is not None and not variant[1] and not traced.closed_over
            options = {"mode": self.mode, "allocator": self.options.allocator, "alignment": self.options.alignment,
                       "passes": self.options.passes, "keep_arena": variant[2], "arena": self.options.arena,
                       "donated": traced.donated,
                       "plan": dataclasses.asdict(self.plan_options)}
            traced.cache_keys[variant] = cache.kernel_key(traced.closed_jaxpr, options) if keep else None
        return traced.cache_keys[variant]

    def _load(self, traced: _Traced, variant) -> bool:
        """Whether the persistent kernel cache had the kernel (now `traced.kernels[variant]`)."""
        if cache.cache_dir() is None or variant[1]:
            return False
        with traced.phases.timed("cache load"):
            key = self.cache_key(traced, variant)
            stored = cache.load(key) if key is not None else None
            if stored is None or stored.makes_arena == variant[2]:
                return False
            traced.deleted = stored.donated
            traced.kernels[variant] = CompiledRun.from_stored(stored, traced.closed_jaxpr.out_avals, keep_arena=variant[2])
        return True

    def _variant(self, inline: bool) -> tuple[tuple[str, int], bool, bool]:
        return self.key, inline, self.options.keep_arena and not inline

    def run(self, traced: _Traced, flat_args, listeners) -> _Ran:
        variant = self._variant(False)
        kernel = traced.kernels.get(variant)
        if kernel is not None and kernel.kernel is not None:  # warm: nothing to plan, trace or compile
            outputs, copied, wrong_rounds = kernel(flat_args)
        else:
            kernel, (outputs, copied, wrong_rounds) = self._first_call(traced, variant, flat_args)
        traced.delete_donated(flat_args, outputs)  # those XLA could not give to an output
        if wrong_rounds:
            raise JaxallocError("a jx.while whose condition ends it in another round than its `rounds` says: its `rounds` is wrong")
        return _Ran(outputs, kernel.arena_bytes, copied, kernel.arena_bytes if self.options.keep_arena else 0,
                    kernel.xla_buffers)

    def _first_call(self, traced: _Traced, variant, flat_args) -> tuple[CompiledRun, tuple]:
        """The kernel of a first call, planned, traced and compiled, or loaded from the persistent
        cache (and stored there where it was made), and what calling it gave. Under
        `jax.disable_jit()` too, which JAX's ahead-of-time compile refuses: a planned function is its
        kernel."""
        with _collector_paused(), jax.disable_jit(False):
            kernel = self.kernel(traced)
            with traced.phases.kernel("call" if kernel.loaded else "kernel trace"):
                if kernel.loaded:
                    kernel, ran = self._call_loaded(traced, variant, kernel, flat_args)
                else:
                    kernel = traced.kernels[variant] = self._compiled(kernel, flat_args, lambda: traced.phases.timed("XLA's buffers"))
                    ran = kernel(flat_args)
            if kernel.stored is not None and not kernel.loaded:
                with traced.phases.timed("cache store"):
                    cache.store(self.cache_key(traced, variant), kernel.stored)
        return kernel, ran

    def _call_loaded(self, traced: _Traced, variant, kernel: CompiledRun, flat_args) -> tuple[CompiledRun, tuple]:
        """The first call of a kernel from the persistent cache. One that fails before it runs (an
        entry that this JAX cannot lower or compile, whatever else its reading let through) is
        forgotten and built again; an error once it runs is the program's own."""
        try:
            return kernel, kernel(flat_args)
        except Exception as e:  # whatever a stale entry does, it is built again
            if any(isinstance(x, jax.Array) and x.is_deleted() for x in flat_args):
                raise
            warnings.warn(f"jaxalloc's kernel cache held an entry it could not run, built again: {first_line(e)}",
                          RuntimeWarning, stacklevel=2)
        cache.forget(self.cache_key(traced, variant))
        del traced.kernels[variant]
        kernel = self.kernel(traced)
        return kernel, kernel(flat_args)

    def measured(self, traced: _Traced, flat_args, sampler: LiveBytesSampler) -> tuple[int, int] | None:
        sampler.take()  # no op to sample after: the one kernel has run
        return self.kernel(traced).memory(flat_args)

    def warm(self, traced: _Traced) -> tuple[Callable[[Sequence], tuple], tuple] | None:
        """A kernel whose status is known as it was traced (`CompiledRun.warm_call`), with no argument to
        delete after it: the call runs it alone, a few microseconds less."""
        kernel = traced.kernels.get(self._variant(False))
        found = kernel.warm_call() if kernel is not None and not traced.donated else None
        if found is None:
            return None
        run, copied = found
        return run, (kernel.arena_bytes, copied, kernel.xla_buffers)

    def inline(self, program: _Program, flat_args) -> Sequence:
        return self.kernel(program.traced, inline=True).inline(flat_args)


RUNNERS: dict[str, type[ModeRunner]] = {r.mode: r for r in (CompiledRunner, ArenaRunner, CheckedRunner, EagerRunner)}
"""The runner of each mode, by name."""

MODES = tuple(RUNNERS)


def runner_for(options: PlannedOptions) -> ModeRunner:
    """The runner of `options.mode`, which plans with their allocator and alignment."""
    return RUNNERS[options.mode](options)


@contextlib.contextmanager
def _collector_paused():
    """Python's cyclic garbage collector paused (where it runs): tracing, passes, planning and
    compiling make many objects that live until they end, which it would scan again and again
    (a tenth of the first call of the transformer training step)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def _concrete(x) -> bool:
    """Whether `x` is a concrete jax array (a PRNG key array too), no tracer."""
    return isinstance(x, jax.Array) and not isinstance(x, core.Tracer)


def _abstract(path, leaf) -> jax.ShapeDtypeStruct:
    if isinstance(leaf, jax.ShapeDtypeStruct):
        return leaf
    if isinstance(leaf, (jax.Array, np.ndarray, np.generic, bool, int, float, complex)):
        aval = jax.typeof(leaf)
        return jax.ShapeDtypeStruct(aval.shape, aval.dtype, weak_type=aval.weak_type)
    raise UnsupportedProgramError(
        f"{_describe(path)} is a {type(leaf).__name__}, "
        "not an array; pass arrays or Python scalars (close over other values, or use functools.partial)"
    )


def _describe(path) -> str:
    """`argument 1['w']` or `keyword argument 'x'` for a leaf's path in (args, kwargs)."""
    which, key, rest = path[0], path[1], jax.tree_util.keystr(tuple(path[2:]))
    if which.idx == 0:
        return f"argument {key.idx}{rest}"
    return f"keyword argument {key.key!r}{rest}"


def _signature(args, kwargs) -> tuple[Any, tuple[jax.ShapeDtypeStruct, ...]]:
    leaves, treedef = jax.tree_util.tree_flatten_with_path((args, kwargs))
    return treedef, tuple(_abstract(path, leaf) for path, leaf in leaves)


@dataclass(frozen=True)
class _Statics:
    """The static arguments of one call, by position and by name, as `jax.jit` takes them: part of
    the cache key, never traced."""

    positional: tuple[tuple[int, Any], ...]
    keyword: tuple[tuple[str, Any], ...]

    def merge(self, args, kwargs) -> tuple[tuple, dict]:
        """The full arguments: the dynamic ones with the static ones put back in their places."""
        merged = list(args)
        for i, value in self.positional:
            merged.insert(i, value)
        return tuple(merged), {**kwargs, **dict(self.keyword)}

    def bind(self, fun: Callable) -> Callable:
        """`fun` with these static arguments filled in: a function of the dynamic ones (for XLA)."""
        if not self.positional and not self.keyword:
            return fun

        def bound(*args, **kwargs):
            args, kwargs = self.merge(args, kwargs)
            return fun(*args, **kwargs)

        bound.__name__ = getattr(fun, "__name__", "main")
        return bound


def _needs_static(e: Exception) -> bool:
    """Whether tracing failed because a traced value had to be a concrete Python value."""
    return isinstance(e, _DATA_DEPENDENT) or "static_argnums" in str(e)


def _tracing_error(name: str, e: Exception) -> UnsupportedProgramError:
    """One line for a failed trace; where a Python value had to be concrete, it says which argument
    (JAX's own words) and suggests static_argnums / static_argnames, as `jax.jit` does."""
    if not _needs_static(e):
        return UnsupportedProgramError(f"tracing {name} with these arguments failed: {first_line(e)}")
    found = _ARGUMENT.search(str(e))
    which = f"; it depends on the value of the argument {found[1]}" if found else ""
    static = f"static_argnames={found[1]!r}" if found else "static_argnums=... or static_argnames=..."
    return UnsupportedProgramError(
        f"{name} cannot be planned: a shape or Python control flow depends on input values "
        f"({first_line(e).rstrip('.')}{which}). If that is a Python value such as a size, mark it "
        f"static as with jax.jit: planned({name}, {static}); if it is array data, give data-dependent ops a "
        "static size (e.g. jnp.nonzero(x, size=N)) and use lax.cond / lax.while_loop for control flow."
    )


class Planned:
    """A function planned by jaxalloc (what `planned` returns); call it like the original function."""

    def __init__(self, fun: Callable, options: PlannedOptions = PlannedOptions()):
        functools.update_wrapper(self, fun)
        self._fun = fun
        self.options = options.for_function(fun)
        self._runner = runner_for(self.options)
        self._last_run: RunStats | tuple | None = None
        self._cache: dict[Any, _Traced] = {}
        self._by_arrays: dict[Any, _Traced] = {}
        """The same traces, by the tree and types of calls of jax arrays alone (`_arrays_key`)."""

    @property
    def mode(self) -> str:
        return self.options.mode

    @property
    def last_run(self) -> RunStats | None:
        """What the last call did (None before the first): made when asked, from what the call kept."""
        if isinstance(self._last_run, tuple):
            if isinstance(self._last_run[0], _Traced):  # a warm call (`_run_warm`)
                traced, seconds, phases = self._last_run
                arena, copied, xla_buffers = traced.warm_stats
                self._last_run = (self.mode, 0, seconds, arena, copied, None, None, phases, traced.output_bytes, 0, None, 0,
                                  xla_buffers)
            self._last_run = RunStats(*self._last_run)
        return self._last_run

    def _split(self, args, kwargs) -> tuple[_Statics, tuple, dict]:
        """The call's static arguments, and its dynamic positional and keyword arguments."""
        numbers = {i if i >= 0 else i + len(args) for i in self.options.static_argnums}
        statics = _Statics(
            tuple((i, a) for i, a in enumerate(args) if i in numbers),
            tuple(sorted((k, v) for k, v in kwargs.items() if k in self.options.static_argnames)),
        )
        dynamic = tuple(a for i, a in enumerate(args) if i not in numbers)
        return statics, dynamic, {k: v for k, v in kwargs.items() if k not in self.options.static_argnames}

    def _traced(self, args, kwargs) -> _Traced:
        """What this call's signature traced to."""
        statics, args, kwargs = self._split(args, kwargs)
        treedef, avals = _signature(args, kwargs)
        key = (statics, treedef, tuple((a.shape, a.dtype, a.weak_type) for a in avals))
        try:
            traced = self._cache.get(key)
        except TypeError as e:
            raise UnsupportedProgramError(f"static arguments must be hashable, as with jax.jit: {e}") from None
        if traced is None:
            donated = self._donated(statics, treedef)
            # outside any enclosing trace: the constants the module holds are arrays, not its tracers; and
            # under `jax.disable_jit()` the same program (its loops not unrolled)
            with _collector_paused(), core.eval_context(), jax.disable_jit(False):
                traced = self._cache[key] = self._trace(statics, treedef, avals)
            traced.donated = donated
            if not isinstance(self._runner, CompiledRunner):
                traced.converted, traced.deleted  # made now: nothing else could make them unneeded
            elif cache.cache_dir() is None:
                traced.lowered, traced.deleted
        return traced

    def _donated(self, statics: _Statics, treedef) -> tuple[int, ...]:
        """The flat arguments donated: every leaf of an argument donated by position or by name."""
        if not self.options.donate_argnums and not self.options.donate_argnames:
            return ()
        skeleton = jax.tree_util.tree_unflatten(treedef, [0] * treedef.num_leaves)
        static = {i for i, _ in statics.positional}
        given = len(skeleton[0]) + len(static)
        positions = [i for i in range(given) if i not in static]  # of the dynamic positional arguments
        numbers = {i if i >= 0 else i + given for i in self.options.donate_argnums}
        if both := numbers & static:
            raise JaxallocError(f"argument {min(both)} is both static and donated; a static argument cannot be donated")
        return tuple(
            k for k, (path, _) in enumerate(jax.tree_util.tree_flatten_with_path(skeleton)[0])
            if (path[0].idx == 0 and positions[path[1].idx] in numbers)
            or (path[0].idx == 1 and path[1].key in self.options.donate_argnames)
        )

    def _trace(self, statics: _Statics, treedef, avals) -> _Traced:
        name = getattr(self._fun, "__name__", "main")
        args, kwargs = statics.merge(*jax.tree_util.tree_unflatten(treedef, avals))
        @functools.wraps(self._fun)  # its signature names the arguments in JAX's messages
        def fresh(*args, **kwargs):  # a new function: jax.jit(f) elsewhere must not share this trace
            return self._fun(*args, **kwargs)

        jitted = jax.jit(fresh, static_argnums=self.options.static_argnums, static_argnames=self.options.static_argnames)
        phases = Phases()
        try:
            with phases.timed("trace"):
                traced = jitted.trace(*args, **kwargs)
        except Exception as e:
            raise _tracing_error(name, e) from (None if _needs_static(e) else e)
        closed, out_tree = traced.jaxpr, jax.tree_util.tree_structure(traced.out_info)
        func_name = name if name.isidentifier() else "main"

        def converting() -> Converted:
            with phases.timed("convert"):
                return convert(closed, func_name)

        def passing(converted: Converted) -> Converted:
            for pass_name in self.options.passes:
                with phases.timed(pass_name):
                    _run_pass(pass_name, converted)
            return converted

        return _Traced(closed, out_tree, _Lowering(converting, passing), phases=phases, closed_over=tuple(traced._consts))

    def trace(self, *args, **kwargs) -> core.ClosedJaxpr:
        """The ClosedJaxpr this function traces to for these arguments."""
        return self._traced(args, kwargs).closed_jaxpr

    def lower(self, *args, **kwargs) -> ModuleOp:
        """The jx module (before planning) for these arguments; arguments may be ShapeDtypeStructs."""
        return self._traced(args, kwargs).converted.module

    def plan(
        self, *args, allocator: str | None = None, alignment: int | None = None, include_outputs: bool = False, **kwargs
    ) -> Plan:
        """The plan a call with these arguments runs (arguments may be ShapeDtypeStructs), in every
        mode the compiled kernel's (`ModeRunner.plan_options`); the allocator and alignment default to
        the function's own. `include_outputs=True` plans every output in the arena too, the plan that
        compares with XLA's `temp + output - alias` (`Plan.compare_xla`)."""
        runner = self._runner
        if allocator is not None or alignment is not None:
            runner = runner_for(dataclasses.replace(
                self.options,
                allocator=self.options.allocator if allocator is None else allocator,
                alignment=self.options.alignment if alignment is None else alignment,
            ))
        traced = self._traced(args, kwargs)
        statics, args, kwargs = self._split(args, kwargs)
        plan = runner.plan(traced, include_outputs)
        # what `Plan.compare_xla` compiles with `jax.jit`: the arguments' types, no array kept alive
        args, kwargs = jax.tree_util.tree_map_with_path(_abstract, (args, kwargs))
        measure_call = None
        if isinstance(runner, CompiledRunner):
            measure_call = functools.partial(runner.call_memory, traced, jax.tree_util.tree_leaves((args, kwargs)))
        return dataclasses.replace(plan, function=statics.bind(self._fun), example_args=args, example_kwargs=kwargs,
                                   source=traced.converted.module, measure_call=measure_call)

    def _arrays_key(self, args, kwargs) -> tuple[Any, list]:
        """A call's cache key where it passes concrete jax arrays alone (no tracer) and nothing is
        static (else None), and its flat arguments: a warm call costs a few microseconds, as
        `jax.jit`'s does. The key holds
        each array's aval (shape, dtype, weak type and sharding), an attribute the array keeps: a few
        times cheaper than reading the three apart; arrays of another sharding make another key for
        the same trace (`_traced`). The avals are read in the pass that tells each leaf a concrete
        array (a third quicker than two passes); any other leaf (a tracer, a Python scalar, a NumPy
        array) makes no key."""
        leaves, treedef = jax.tree_util.tree_flatten((args, kwargs))
        if self.options.static_argnums or self.options.static_argnames:
            return None, leaves
        avals = tuple([x.aval for x in leaves if type(x) is ArrayImpl or _concrete(x)])
        return ((treedef, avals) if len(avals) == len(leaves) else None), leaves

    def __call__(self, *args, **kwargs):
        key, flat_args = self._arrays_key(args, kwargs)
        traced = self._by_arrays.get(key) if key is not None else None
        if traced is not None and traced.warm is not None and not traced.closed_over:
            return jax.tree_util.tree_unflatten(traced.out_tree, self._run_warm(traced, flat_args))
        if traced is None:
            for path, leaf in jax.tree_util.tree_flatten_with_path((args, kwargs))[0]:
                if isinstance(leaf, jax.ShapeDtypeStruct):
                    raise UnsupportedProgramError(
                        f"{_describe(path)} is a jax.ShapeDtypeStruct, which has no values to run on: call with "
                        f"arrays, or use .lower(...) / .plan(...) for abstract arguments"
                    )
            traced = self._traced(args, kwargs)
            if key is not None:
                self._by_arrays[key] = traced
            _, args, kwargs = self._split(args, kwargs)
            flat_args = jax.tree_util.tree_leaves((args, kwargs))
        if traced.closed_over or (key is None and any(isinstance(x, core.Tracer) for x in flat_args)):
            # under a transformation: see `planned_call`
            outputs = planned_call.bind([*traced.closed_over, *flat_args], traced.closed_jaxpr, self.options.program_options,
                                        _Program(self, traced.closed_jaxpr, traced))
            return jax.tree_util.tree_unflatten(traced.out_tree, outputs)
        if traced.donated:
            _check_donated(flat_args, traced.donated, args, kwargs)
        return jax.tree_util.tree_unflatten(traced.out_tree, self._run(traced, flat_args))

    def _run_warm(self, traced: _Traced, flat_args) -> tuple:
        """A call that runs the signature's kernel alone (`_Traced.warm`), its `last_run` kept as the
        signature, the time and the work since the last call (`last_run` makes the rest)."""
        start = time.perf_counter()
        outputs = traced.warm(flat_args)
        self._last_run = (traced, time.perf_counter() - start, traced.phases.take())
        return outputs

    def _run(self, traced: _Traced, flat_args) -> tuple:
        """The flat outputs of one concrete call, its `last_run` recorded (as the fields of a
        `RunStats`, made when `last_run` is read)."""
        if traced.warm is not None:
            return self._run_warm(traced, flat_args)
        counter = _OpCounter()
        sampler = LiveBytesSampler() if self.options.measure_memory else None
        start = time.perf_counter()
        ran = self._runner.run(traced, flat_args, [counter] if sampler is None else [counter, sampler])
        seconds = time.perf_counter() - start
        measured = self._runner.measured(traced, flat_args, sampler) if sampler is not None else None
        temp, aliased = measured if measured is not None else (None, 0)
        before, peak = (sampler.before, sampler.peak) if sampler is not None else (None, None)
        if traced.output_bytes is None:
            traced.output_bytes = sum(x.nbytes for x in ran.outputs if isinstance(x, jax.Array))
        # `RunStats`'s fields in order: a tuple costs a fraction of the dataclass a call may never read
        self._last_run = (self.mode, counter.ops, seconds, ran.arena_bytes, ran.copied_bytes, before, peak,
                          traced.phases.take(), traced.output_bytes, ran.held_bytes, temp, aliased, ran.xla_buffers)
        if sampler is None and (warm := self._runner.warm(traced)) is not None:
            traced.warm, traced.warm_stats = warm
        return ran.outputs


class _Program:
    """One program of a planned function as `planned_call` runs it (a `planned_call.Runner`): a
    signature the function traced, or a program a transformation derived, traced on first use."""

    def __init__(self, planned: Planned, jaxpr: core.ClosedJaxpr, traced: _Traced | None = None):
        self.planned, self.jaxpr, self._traced = planned, jaxpr, traced

    @property
    def traced(self) -> _Traced:
        if self._traced is None:
            avals = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in self.jaxpr.in_avals]
            self._traced = self.planned._traced(tuple(avals), {})
        return self._traced

    @property
    def name(self) -> str:
        return self.traced.lowered.func.sym_name.data

    @property
    def plan(self) -> Plan:
        """The plan this program runs in its mode (`ModeRunner.plan`)."""
        return self.planned._runner.plan(self.traced)

    @property
    def plan_with_outputs(self) -> Plan:
        return self.planned._runner.plan(self.traced, include_outputs=True)

    def run(self, flat_args):
        return self.planned._run(self.traced, flat_args)

    def inline(self, flat_args):
        return self.planned._runner.inline(self, flat_args)


def _derived_program(jaxpr: core.ClosedJaxpr, options: Options, name: str) -> _Program:
    """A program a transformation derived (`planned_call`), planned as a function of its flat inputs."""

    def program(*args):
        return core.eval_jaxpr(jaxpr.jaxpr, jaxpr.consts, *args)

    program.__name__ = program.__qualname__ = name
    return _Program(Planned(program, PlannedOptions(**dataclasses.asdict(options))), jaxpr)


planned_call.make_runner = _derived_program


def plans(fun: Callable, *args, **kwargs) -> dict[str, Plan]:
    """The plan of every planned function `fun` calls on these arguments (arrays or
    ShapeDtypeStructs), by program name, the programs a transformation derived included:
    `plans(jax.grad(planned(loss)), params)` gives the plans of `loss_fwd` (the forward program,
    which also returns the residuals) and of `loss_lin_bwd` (the backward program)."""
    runners = planned_call.programs(jax.make_jaxpr(fun)(*args, **kwargs).jaxpr)
    return {runner.name: runner.plan for runner in runners}


def _deleted_by_jit(traced: _Traced, donated: tuple[int, ...]) -> tuple[int, ...]:
    """The donated flat arguments `jax.jit` deletes: those its lowering lets XLA give to an output
    (`tf.aliasing_output`) or take as a buffer donor. It keeps a donated array that no output can
    take, or that the function never reads (dropped before lowering)."""
    if not donated:
        return ()
    closed, first = traced.closed_jaxpr, len(traced.closed_over)
    _, used = pe.dce_jaxpr(closed.jaxpr, [True] * len(closed.out_avals))
    lowered_as = {k: n for n, k in enumerate(k for k, u in enumerate(used) if u)}
    avals = [jax.ShapeDtypeStruct(a.shape, a.dtype, weak_type=a.weak_type) for a in closed.in_avals]
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", "Some donated buffers were not usable")
        text = jax.jit(core.jaxpr_as_fun(closed), donate_argnums=tuple(first + k for k in donated)).lower(*avals).as_text()
    header = next(line for line in text.splitlines() if "func.func public @main(" in line)
    given = {int(n) for n, attributes in re.findall(r"%arg(\d+): [^%]*?(\{[^}]*\})?(?=, %arg|\) ->)", header)
             if "tf.aliasing_output" in attributes or "jax.buffer_donor" in attributes}
    return tuple(k for k in donated if lowered_as.get(first + k) in given)


def _check_donated(flat_args, donated: tuple[int, ...], args, kwargs) -> None:
    """A donated array must not also be passed as another argument (`jax.jit` refuses it too)."""
    arrays = [id(a) for a in flat_args if isinstance(a, jax.Array)]
    for k in donated:
        if isinstance(flat_args[k], jax.Array) and arrays.count(id(flat_args[k])) > 1:
            path = jax.tree_util.tree_flatten_with_path((args, kwargs))[0][k][0]
            raise JaxallocError(
                f"{_describe(path)} is donated, but the same array is passed as another argument too; "
                "pass a copy (jax.jit refuses this as well)"
            )


def planned(
    fun: Callable | None = None,
    /,
    *,
    static_argnums: int | Sequence[int] | None = None,
    static_argnames: str | Iterable[str] | None = None,
    donate_argnums: int | Sequence[int] | None = None,
    donate_argnames: str | Iterable[str] | None = None,
    mode: str = "compiled",
    allocator: str = "nnc",
    alignment: int = 64,
    passes: Sequence[str] = DEFAULT_PASSES,
    measure_memory: bool = False,
    keep_arena: bool = False,
    arena: str = "smaller",
) -> Planned | Callable[[Callable], Planned]:
    """Trace `fun` to a jx module (once per input signature), plan it, and run it inside its arena, like `jax.jit`.

    Use as `@planned` or `@planned(mode=..., allocator=..., alignment=...)`. `static_argnums` /
    `static_argnames` mark arguments static and `donate_argnums` / `donate_argnames` donate them, as
    `jax.jit` does: a donated argument is a row of the arena from the start to its last use, written
    there as the call starts (the caller's array is deleted), so later values and the outputs may
    take its bytes.

    `mode` (a `ModeRunner`): `"compiled"` (the default) runs the plan as one jitted kernel, every
    value at its planned offset, its arena a temporary of the call (`keep_arena=True`: kept between
    calls, donated to each). Without `keep_arena`, a compiled call runs the plan's kernel where it
    holds no more than the module on XLA's own buffers would (both by XLA's `memory_analysis()`,
    compiled side by side at the first call), else that module, with no arena
    (`last_run.xla_buffers`); `arena="always"` runs the plan's kernel regardless. `"arena"` runs
    the same plan op by op from Python, for debugging;
    `"checked"` runs it op by op with shadow memory, raising `jaxalloc.PlanViolation` where a read
    finds another value's bytes; `"eager"` runs on plain jax arrays. `allocator` places the buffers,
    every offset a multiple of `alignment` bytes. `passes` are the jx passes run, in order, before
    planning (`PASSES`; `DEFAULT_PASSES` by default, `("jx-dce",)` for the program's own ops in
    traced order, `()` for the jaxpr as traced). `measure_memory=True` samples the bytes in use into
    `last_run`. Every option is checked here (`PlannedOptions`): a bad one is a one-line error.
    """
    options = PlannedOptions(
        mode=mode, allocator=allocator, alignment=alignment, passes=passes,
        static_argnums=static_argnums, static_argnames=static_argnames,
        donate_argnums=donate_argnums, donate_argnames=donate_argnames,
        measure_memory=measure_memory, keep_arena=keep_arena, arena=arena,
    )
    if fun is None:
        return functools.partial(Planned, options=options)
    return Planned(fun, options)
