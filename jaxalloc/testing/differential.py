"""The differential check every test program goes through.

Convert, print, parse back, verify, print identically; interpret the parsed module (inside
its planned arena, or eagerly) and compare with `jax.jit`: exact for integer, bool and key
outputs, close for floats, with a tolerance from the narrowest float type in the program
(`program_tolerance`). A compiled run also fails where XLA copies the whole arena in the kernel,
or where the kernel holds a callback more or less often than the module runs it.

`jax.jit` is the reference, but not an infallible one. Where the planned result differs from
jit's, `check_program` computes the op-by-op reference under `jax.disable_jit()` (what jaxalloc
executes): if the planned result matches that one, the check passes and warns with
`JitDisagreement`, records the case in `JIT_DISAGREEMENTS` and on the returned function's
`jit_disagreement`; if it matches neither, the check fails showing all three results.
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections import Counter
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import core
from xdsl.dialects.builtin import ModuleOp

import jaxalloc
from jaxalloc.api import DEFAULT_PASSES, KERNEL_PLAN, PlanOptions
from jaxalloc.dialects import jx
from jaxalloc.frontend.convert import Converted, parse_module
from jaxalloc.frontend.types import byte_size
from jaxalloc.planning.assignment.ir import is_small

AS_TRACED = ("jx-dce",)
"""The passes that leave the program's ops as traced (only dead code goes): for tests of the planner,
and as the baseline the other passes are measured against."""

# Op-by-op and jitted runs must agree to float32 rounding; GPUs multiply float32 matrices in
# TF32 by default, which differs between kernels far more than that.
jax.config.update("jax_default_matmul_precision", "highest")

FLOAT_TOLERANCE = {"rtol": 2e-5, "atol": 2e-6}
"""Float outputs of programs that compute in float32 (or wider) throughout."""

LOW_PRECISION_ULPS = 4
"""Programs with a narrower float type anywhere get rtol = atol = this many of its eps.

`jax.jit` may keep a fused chain of float16/bfloat16 ops in float32 (XLA CPU does, on CPUs with
AVX512-FP16 for float16), while op-by-op execution, like `jax.disable_jit()`, rounds between ops;
a result differs by an ulp of the narrow type or a little more, whatever type it is stored in:
a float32 result of float16 math is only as good as float16. eps is 2**-10 for float16 (rtol 3.9e-3),
2**-7 for bfloat16 (3.1e-2), 2**-3 and 2**-2 for the float8 types (0.5 and 1.0)."""


SMALL_VALUES_PLACED = dataclasses.replace(KERNEL_PLAN, small_outside=False)
"""The compiled kernel's plan with its small values in the arena, the plan random programs run: every
value of theirs is small, so the kernel's own plan leaves all of them to XLA, and its arena empty,
where this one places their loops' rings, toggles and views in the arena, as a program of larger
values has them."""


THOROUGH = os.environ.get("JAXALLOC_THOROUGH") == "1"
"""`JAXALLOC_THOROUGH=1` checks every program where the suite, within its ten minutes, checks a sample."""


def sample(programs, every: int, first: int = 0):
    """Every `every`-th of `programs` from `first`, or all of them with `JAXALLOC_THOROUGH=1`."""
    return programs if THOROUGH else programs[first::every]


def float_tolerance(dtype) -> dict[str, float]:
    """rtol and atol for float results of a program whose narrowest float type is `dtype` (None: none)."""
    if dtype is None:
        return dict(FLOAT_TOLERANCE)
    eps = float(jnp.finfo(dtype).eps)  # a complex type's is its parts'
    if eps <= float(jnp.finfo(jnp.float32).eps):
        return dict(FLOAT_TOLERANCE)
    return {"rtol": LOW_PRECISION_ULPS * eps, "atol": LOW_PRECISION_ULPS * eps}


def _is_float(dtype) -> bool:
    return dtype is not None and jax.dtypes.issubdtype(dtype, np.inexact)


def _narrower(a, b):
    """The float type of `a` and `b` with the larger eps (None stands for no float type)."""
    if not _is_float(b):
        return a
    if not _is_float(a):
        return np.dtype(b)
    return np.dtype(b) if jnp.finfo(b).eps > jnp.finfo(a).eps else a


def _sub_jaxprs(params):
    """Jaxprs in an equation's params, in tuples and lists too (scan, while, cond, pjit, custom_jvp...)."""
    stack = list(params.values())
    while stack:
        value = stack.pop()
        if isinstance(value, core.ClosedJaxpr):
            yield value.jaxpr
        elif isinstance(value, core.Jaxpr):
            yield value
        elif isinstance(value, tuple | list):
            stack.extend(value)


def narrowest_float(jaxpr: core.ClosedJaxpr | core.Jaxpr) -> np.dtype | None:
    """The float type with the largest eps anywhere in `jaxpr`: inputs, constants, literals, every
    equation's outputs and those of nested jaxprs. None where nothing is a float."""
    narrowest = None
    stack = [jaxpr.jaxpr if isinstance(jaxpr, core.ClosedJaxpr) else jaxpr]
    while stack:
        j = stack.pop()
        atoms = [*j.constvars, *j.invars, *j.outvars]
        for eqn in j.eqns:
            atoms += [*eqn.invars, *eqn.outvars]
            stack.extend(_sub_jaxprs(eqn.params))
        for atom in atoms:
            narrowest = _narrower(narrowest, getattr(atom.aval, "dtype", None))
    return narrowest


def program_tolerance(jaxpr: core.ClosedJaxpr | core.Jaxpr) -> dict[str, float]:
    """rtol and atol for every float output of the program `jaxpr`: `float_tolerance` of its narrowest float type."""
    return float_tolerance(narrowest_float(jaxpr))


def _leaf_tolerance(dtype, tolerance: dict[str, float] | None) -> dict[str, float]:
    """The program's tolerance, never tighter than the output's own type allows."""
    own = float_tolerance(dtype)
    if tolerance is None:
        return own
    return {k: max(own[k], tolerance[k]) for k in ("rtol", "atol")}


def _as_arrays(tree):
    """Python and numpy scalars (which `jax.disable_jit()` may hand back) as jax arrays, weak types kept."""
    return jax.tree_util.tree_map(lambda v: v if isinstance(v, jax.Array) else jnp.asarray(v), tree)


def mismatches(actual, expected, tolerance: dict[str, float] | None = None) -> list[tuple[str, str]]:
    """Where `actual` and `expected` differ: (output path, what differs) pairs; empty when they agree.

    Structure, weak types, shapes and dtypes must be equal; integers, bools and keys exact; floats
    close within `tolerance` (None: each output's `float_tolerance`), never tighter than the output's own
    type allows.
    """
    a_leaves, a_tree = jax.tree_util.tree_flatten_with_path(actual)
    e_leaves, e_tree = jax.tree_util.tree_flatten_with_path(expected)
    if jax.tree_util.tree_structure(actual) != jax.tree_util.tree_structure(expected):
        return [("", f"output structure {a_tree} != {e_tree}")]
    found = []
    for (path, a), (_, e) in zip(a_leaves, e_leaves):
        where = "output" + jax.tree_util.keystr(path)
        if jax.dtypes.issubdtype(e.dtype, jax.dtypes.prng_key):
            a, e = jax.random.key_data(a), jax.random.key_data(e)
        if jax.typeof(a).weak_type != jax.typeof(e).weak_type:
            found.append((where, f"weak type {jax.typeof(a)} != {jax.typeof(e)}"))
            continue
        a, e = np.asarray(a), np.asarray(e)
        if a.shape != e.shape or a.dtype != e.dtype:
            found.append((where, f"{a.shape}/{a.dtype} != {e.shape}/{e.dtype}"))
            continue
        try:
            if jax.dtypes.issubdtype(e.dtype, np.inexact):
                wide = np.complex128 if jax.dtypes.issubdtype(e.dtype, np.complexfloating) else np.float64
                np.testing.assert_allclose(a.astype(wide), e.astype(wide), **_leaf_tolerance(e.dtype, tolerance))
            else:
                np.testing.assert_array_equal(a, e)
        except AssertionError as error:
            found.append((where, str(error).strip()))
    return found


def assert_same(actual, expected, tolerance: dict[str, float] | None = None) -> None:
    """Pytree-equal: same structure, exact integers/bools/keys, close floats (see `mismatches`)."""
    found = mismatches(actual, expected, tolerance)
    assert not found, "\n".join(f"{where}: {what}" if where else what for where, what in found)


def check_roundtrip(module) -> ModuleOp:
    """Print, parse back, verify and print again: both texts must be equal. Returns the module
    parsed back."""
    module.verify()
    text = str(module)
    parsed = parse_module(text)
    parsed.verify()
    assert str(parsed) == text, "the printed module does not print identically after parsing"
    return parsed


class JitDisagreement(UserWarning):
    """`jax.jit` and `jax.disable_jit()` disagree on a program; the planned result matched `disable_jit`."""


@dataclass(frozen=True)
class Disagreement:
    """One program on which `jax.jit` disagreed with `jax.disable_jit()` (and the planned result with jit)."""

    program: str
    mode: str
    outputs: tuple[str, ...]
    """Paths of the outputs on which jit and disable_jit differ (those on which the planned result
    differs from jit, where jit and disable_jit agree within tolerance)."""
    message: str
    """The warning's text: which output, by how much, the values."""


JIT_DISAGREEMENTS: list[Disagreement] = []
"""Every disagreement `check_program` has seen in this process, oldest first; a soak script can
read it (or its length) after a run. Tests may clear it."""


def jit_reference(fn, *args):
    """What `check_program` compares with first: `jax.jit(fn)(*args)`. A test may put another in its
    place (monkeypatch) to stand in for jit on a CPU it does not have."""
    return jax.jit(fn)(*args)


def disable_jit_reference(fn, *args):
    """The op-by-op reference: `fn(*args)` under `jax.disable_jit()`, leaves as jax arrays."""
    with jax.disable_jit():
        return _as_arrays(fn(*args))


def _show(tree) -> str:
    leaves = jax.tree_util.tree_flatten_with_path(tree)[0]
    lines = []
    for path, leaf in leaves:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):
            leaf = jax.random.key_data(leaf)
        value = np.array2string(np.asarray(leaf), threshold=64, edgeitems=3, max_line_width=120)
        lines.append(f"    output{jax.tree_util.keystr(path)} {jax.typeof(leaf)}: " + value.replace("\n", "\n      "))
    return "\n".join(lines) or "    (no arrays)"


def _max_abs_difference(a, b) -> str:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.size == 0:
        return "n/a"
    if a.dtype == bool or b.dtype == bool:
        return str(int(np.count_nonzero(a != b))) + " elements"
    wide = np.complex128 if np.iscomplexobj(a) or np.iscomplexobj(b) else np.float64
    try:
        return f"{float(np.nanmax(np.abs(a.astype(wide) - b.astype(wide)))):.6g}"
    except (TypeError, ValueError):
        return "n/a"


def _differences(first, second, paths) -> str:
    """`max |first - second|` of the outputs at `paths`, one line each."""
    f_leaves = {"output" + jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(first)[0]}
    s_leaves = {"output" + jax.tree_util.keystr(p): v for p, v in jax.tree_util.tree_flatten_with_path(second)[0]}
    lines = []
    for path in paths:
        a, b = f_leaves.get(path), s_leaves.get(path)
        if a is not None and b is not None:
            if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):
                a, b = jax.random.key_data(a), jax.random.key_data(b)
            lines.append(f"  {path}: max |difference| {_max_abs_difference(a, b)}")
        else:
            lines.append(f"  {path or 'output structure'}")
    return "\n".join(lines)


def _program_name(fn) -> str:
    name = getattr(fn, "__qualname__", None) or repr(fn)
    code = getattr(fn, "__code__", None)
    if "<lambda>" in name and code is not None:
        name += f" ({code.co_filename.rsplit('/', 1)[-1]}:{code.co_firstlineno})"
    return name


def check_program(fn, *args, mode: str = "arena", name: str | None = None, passes=DEFAULT_PASSES,
                  plan: PlanOptions | None = None) -> jaxalloc.Planned:
    """The whole differential check for `fn(*args)` run in `mode` (running `plan`, by default the
    mode's own, `ModeRunner.plan_options`); returns the planned function.

    The planned result must match `jax.jit`'s within `program_tolerance`, or else the op-by-op
    reference (`jax.disable_jit()`): then jit is the one that is off, and the check warns with
    `JitDisagreement` and appends a `Disagreement` to `JIT_DISAGREEMENTS`. The returned function's
    `jit_disagreement` is that `Disagreement`, or None. `name` names the program in messages
    (default: the function's name).
    """
    return check_modes(fn, *args, modes=(mode,), name=name, passes=passes, plan=plan)[mode]


def check_modes(fn, *args, modes: tuple[str, ...], name: str | None = None,
                passes=DEFAULT_PASSES, plan: PlanOptions | None = None) -> dict[str, jaxalloc.Planned]:
    """`check_program` in each of `modes`, by mode: the program traced, planned from its printed and
    parsed-back module, and run by `jax.jit`, once for all of them."""
    name = name or _program_name(fn)
    first = jaxalloc.planned(fn, passes=passes)
    traced = first._traced(args, {})
    parsed = Converted(check_roundtrip(traced.converted.module), traced.converted.table)
    reference = _Reference(fn, args, name, program_tolerance(traced.closed_jaxpr))
    checked = {}
    for mode in modes:
        planned = checked[mode] = jaxalloc.planned(fn, mode=mode, passes=passes, arena="always")
        if plan is not None:
            planned._runner.plan_options = plan
        planned._cache = {k: type(v)(v.closed_jaxpr, v.out_tree, parsed) for k, v in first._cache.items()}
        result = planned(*args)
        if mode == "compiled":
            assert_the_kernel_keeps_its_arena(planned, args, name)
            assert_the_kernel_traces_each_effect_once(planned, name)
        planned.jit_disagreement = reference.compare(result, mode)
    return checked


class _Reference:
    """`jax.jit`'s result of a program, and `jax.disable_jit()`'s where a planned result differs from
    it, each computed once for every mode compared with them."""

    def __init__(self, fn, args, name: str, tolerance: dict[str, float]):
        self.fn, self.args, self.name, self.tolerance = fn, args, name, tolerance
        self._jitted = self._op_by_op = None

    @property
    def jitted(self):
        if self._jitted is None:
            self._jitted = jit_reference(self.fn, *self.args)
        return self._jitted

    def op_by_op(self, mode: str, jit_report: str):
        if self._op_by_op is None:
            try:
                self._op_by_op = disable_jit_reference(self.fn, *self.args)
            except Exception as error:  # no second opinion: the difference from jit stands
                raise AssertionError(
                    f"{self.name} ({mode}): the planned result differs from jax.jit's, and running it under "
                    f"jax.disable_jit() failed ({type(error).__name__}: {error}):\n{jit_report}"
                ) from error
        return self._op_by_op

    def compare(self, result, mode: str) -> Disagreement | None:
        """Raise where `result` matches neither reference; the disagreement where it matches
        `jax.disable_jit()` and not jit (warned and recorded), else None."""
        name, tolerance, jitted = self.name, self.tolerance, self.jitted
        versus_jit = mismatches(result, jitted, tolerance)
        if not versus_jit:
            return None
        jit_report = "\n".join(f"{where}: {what}" if where else what for where, what in versus_jit)
        op_by_op = self.op_by_op(mode, jit_report)
        versus_op_by_op = mismatches(result, op_by_op, tolerance)
        if versus_op_by_op:
            raise AssertionError(
                f"{name} ({mode}): the planned result matches neither jax.jit's nor jax.disable_jit()'s\n"
                f"  planned:\n{_show(result)}\n  jax.jit:\n{_show(jitted)}\n  jax.disable_jit():\n{_show(op_by_op)}\n"
                f"planned vs jax.jit:\n{jit_report}\nplanned vs jax.disable_jit():\n"
                + "\n".join(f"{where}: {what}" if where else what for where, what in versus_op_by_op)
            )
        jit_vs_op_by_op = [where for where, _ in mismatches(jitted, op_by_op, tolerance)]
        if jit_vs_op_by_op:
            outputs, summary = tuple(jit_vs_op_by_op), "jax.jit disagrees with jax.disable_jit()"
            differences = _differences(jitted, op_by_op, outputs)
        else:  # each within tolerance of the op-by-op result, not of each other
            outputs = tuple(where for where, _ in versus_jit)
            summary = "jax.jit differs from the planned result; both are within tolerance of jax.disable_jit()"
            differences = _differences(jitted, result, outputs)
        message = (
            f"{name} ({mode}): {summary}; the planned result matches jax.disable_jit() and passes against it\n"
            f"{differences}\n"
            f"  jax.jit:\n{_show(jitted)}\n  jax.disable_jit() and planned:\n{_show(op_by_op)}"
        )
        record = Disagreement(name, mode, outputs, message)
        JIT_DISAGREEMENTS.append(record)
        warnings.warn(message, JitDisagreement, stacklevel=4)
        return record


class ArenaCopies(AssertionError):
    """XLA copies the whole arena in a compiled kernel: values do not stay where the plan put them."""


def assert_the_kernel_keeps_its_arena(planned: jaxalloc.Planned, args, name: str) -> None:
    """Honest memory in compiled mode: XLA updates the arena in place and never copies it."""
    for traced in planned._cache.values():
        for kernel in traced.kernels.values():
            copies = kernel.arena_copies(kernel.executable(jax.tree_util.tree_leaves(args)))
            if copies:
                raise ArenaCopies(f"{name} (compiled): XLA copies the whole arena {copies} times in the kernel")


def assert_the_kernel_traces_each_effect_once(planned: jaxalloc.Planned, name: str) -> None:
    """Every callback of the module in the kernel as often as the kernel runs it: a trace that left a
    callback behind would run it twice, where the program's arguments may never show it."""
    for traced in planned._cache.values():
        for kernel in traced.kernels.values():
            effects = _module_effects(kernel.module, kernel.functions.table, bool(kernel.arena_bytes))
            traced_effects = _jaxpr_effects(kernel.jaxpr.jaxpr)
            if effects != traced_effects:
                raise AssertionError(f"{name} (compiled): the kernel holds its callbacks {_counts(traced_effects)} "
                                     f"times where the module runs them {_counts(effects)}: a trace left one "
                                     "behind, or lost one")


def _module_effects(module, table, in_arena: bool = True) -> Counter:
    """The effects (callbacks) of a module as its kernel traces them, by callback: one in a loop's
    condition twice where the kernel runs in an arena (`in_arena`), as it runs the condition once
    before the loop and again at the end of each round; once in a kernel of an empty arena, which
    traces each loop as `lax.while_loop`."""
    counts = Counter()
    for op in module.walk():
        if isinstance(op, jx.PrimOp) and op.effect is not None:
            conditions, region = 0, op.parent_region()
            while region is not None:
                owner = region.parent_op()
                conditions += in_arena and isinstance(owner, jx.WhileOp) and region is owner.cond
                region = owner.parent_region() if owner is not None else None
            counts[table[op.key.data].params.get("callback", op.primitive.data)] += 2**conditions
    return counts


def _jaxpr_effects(jaxpr) -> Counter:
    """The effectful equations of a jaxpr that call nothing, in it and every jaxpr it calls, by
    callback."""
    counts = Counter()
    for eqn in jaxpr.eqns:
        inner = [v for v in eqn.params.values() if isinstance(v, core.Jaxpr | core.ClosedJaxpr)]
        inner += [x for v in eqn.params.values() if isinstance(v, tuple | list) for x in v
                  if isinstance(x, core.Jaxpr | core.ClosedJaxpr)]
        if inner:
            for j in inner:
                counts += _jaxpr_effects(getattr(j, "jaxpr", j))
        elif eqn.effects:
            counts[eqn.params.get("callback", eqn.primitive.name)] += 1
    return counts


def _counts(effects: Counter) -> list[int]:
    return sorted(effects.values())


@dataclass(frozen=True)
class MemoryFigures:
    """What an arena run of a program measurably took, against what its plan allows.

    Where the device counts its own bytes in use (`memory_stats()`), every buffer is counted as
    its allocator holds it: rounded up to the allocator's 256-byte granule.
    """

    arena: int
    outputs: int
    largest_op: int
    """An upper bound on what one op holds besides the arena: its operands and results (a loop's
    operands stay referenced while it runs, so its carried values outside the arena count twice)."""
    small: int
    """The bytes of every small value the ops compute, which the plan leaves to XLA (`small_outside`): an
    upper bound on those alive at once."""
    measured: int
    """Peak bytes in use during the run, less those in use before it (the arguments among them)."""

    @property
    def allowed(self) -> int:
        return self.arena + self.outputs + self.largest_op + self.small


def memory_figures(fn, *args) -> MemoryFigures:
    """Run `fn` in its arena with memory sampling after every op."""
    stats = jax.devices()[0].memory_stats() or {}
    granule = 256 if "bytes_in_use" in stats else 1
    held = lambda nbytes: -(-nbytes // granule) * granule  # noqa: E731
    planned = jaxalloc.planned(fn, mode="arena", measure_memory=True)
    outputs = planned(*args)
    run = planned.last_run
    ops = [op for op in planned.plan(*args).module.walk() if isinstance(op, jx.PrimOp | jx.WhileOp | jx.CaseOp)]
    largest = max((sum(held(byte_size(v.type)) for v in (*op.operands, *op.results)) for op in ops), default=0)
    small = sum(held(byte_size(r.type)) for op in ops for r in op.results if is_small(r))
    output_bytes = sum(held(o.nbytes) for o in jax.tree_util.tree_leaves(outputs))
    return MemoryFigures(held(run.arena_bytes), output_bytes, largest, small, run.peak_live_bytes - run.live_bytes_before)


def assert_deterministic_args(make_args) -> None:
    """`make_args()` gives equal arguments bit for bit on every call (same types, keys by their data)."""
    first, second = make_args(), make_args()
    assert isinstance(first, tuple)
    assert jax.tree_util.tree_structure(first) == jax.tree_util.tree_structure(second)
    for a, b in zip(jax.tree_util.tree_leaves(first), jax.tree_util.tree_leaves(second)):
        if jax.dtypes.issubdtype(jax.numpy.result_type(a), jax.dtypes.prng_key):
            a, b = jax.random.key_data(a), jax.random.key_data(b)
        assert type(a) is type(b)
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


# ---------------------------------------------------------------------------------------------
# random programs (jaxalloc.testing.random_programs)


class CopiedBytes(AssertionError):
    """An arena run copied bytes: the plan left a value where it is not read next."""


class CallbackMismatch(AssertionError):
    """The planned run handed its debug callbacks other values, or in another order, than jit."""


def _same(actual, expected) -> bool:
    try:
        assert_same(actual, expected)
    except AssertionError:
        return False
    return True


def check_callbacks(program, planned: jaxalloc.Planned) -> None:
    """Run `program` with jit, then planned: its callbacks must receive the same values. Ordered
    callbacks must run in the same order; an unordered call site must receive the same values,
    in any order (jit, and `jax.disable_jit()` too, may run its calls in any order, e.g. one per
    vmap lane)."""
    fn, args = program
    runs = []
    for run in (jax.jit(fn), planned):
        program.log.clear()
        jax.block_until_ready(run(*args))
        jax.effects_barrier()
        runs.append(list(program.log.entries))
    expected, actual = runs
    ordered = program.log.ordered
    e_ordered, a_ordered = ([e for e in entries if ordered[e[0]]] for entries in (expected, actual))
    if [t for t, _ in a_ordered] != [t for t, _ in e_ordered]:
        raise CallbackMismatch(
            f"ordered callbacks ran as {[t for t, _ in a_ordered]}, with jit as {[t for t, _ in e_ordered]}"
        )
    for k, ((tag, a), (_, e)) in enumerate(zip(a_ordered, e_ordered)):
        if not _same(a, e):
            raise CallbackMismatch(f"ordered call {k} (callback {tag}) received {a}, with jit {e}")
    for tag in sorted(t for t, is_ordered in ordered.items() if not is_ordered):
        left = [v for t, v in expected if t == tag]
        calls = [v for t, v in actual if t == tag]
        if len(calls) != len(left):
            raise CallbackMismatch(f"callback {tag} ran {len(calls)} times, with jit {len(left)} times")
        for values in calls:
            match = next((k for k, e in enumerate(left) if _same(values, e)), None)
            if match is None:
                raise CallbackMismatch(f"callback {tag} received {values}, which jit did not pass it: {left}")
            left.pop(match)


def check_random_program(program, mode: str = "checked", passes=(),
                         plan: PlanOptions | None = SMALL_VALUES_PLACED) -> jaxalloc.Planned:
    """The differential check of one random program in `mode` (after `passes`, running `plan`), no
    bytes copied in an arena run, and the same callback calls as jit. Returns the planned function.

    By default no pass runs: the planner sees the program as generated, dead loops and branches
    included (the generator makes many, and they are its nested control flow); and the plan places
    the program's small values in the arena (`SMALL_VALUES_PLACED`; `plan=None`: the mode's own plan)."""
    fn, args = program
    planned = check_program(fn, *args, mode=mode, passes=passes, plan=plan)
    if program.log.ordered:
        check_callbacks(program, planned)
    if mode != "eager" and planned.last_run.copied_bytes:
        raise CopiedBytes(f"the {mode} run copied {planned.last_run.copied_bytes} bytes")
    return planned
