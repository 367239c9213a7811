"""Seeded random JAX programs for the differential tests.

`random_program(seed)` returns a `Program`: unpack it as `fn, args = random_program(seed)`,
and `program.describe()` gives the program as Python source, one op a line with the
type of every value, so a failing seed can be read and rerun by hand.

The generator keeps a *value pool* per block: it picks an op whose operands exist in the
pool (right kind, compatible shapes) and adds the results to the pool. Bodies of `scan`,
`fori_loop`, `while_loop`, `cond`, `switch`, `jax.vmap`, `jax.grad` and inlined calls
(`jax.jit`, `jax.checkpoint`) are generated recursively with their own pool: their
parameters plus a few values of the enclosing pool, which they close over. Control flow
nests two or three deep, and now and then four deep (`cf_deep`: loop in case in loop in case...).

Besides random ops, the generator makes the program shapes that found planner bugs:

- chains of conds in which one branch hands back its operand unchanged, and case results that
  then feed loops as init carries (`cf_cond_chain`);
- loop carries that are a pure swap `(a, b) -> (b, a)` or rotation `(a, b, c) -> (b, c, a)`, with
  and without one computed position (`cf_rotate`); bodies that yield a closed-over value, the same
  value at two positions, or a constant; an init also read inside the body; a scan whose init
  carry is also its xs (see `_Scope.carry_plan`);
- zero-trip loops: `fori_loop(0, n)` with n == 0 computed from data, while loops whose condition
  is false at the start;
- values read again after the loop or case they fed (`_Scope.read_after`);
- dynamic_slice / dynamic_update_slice with start indices out of range, computed from data in
  loop bodies, which JAX clamps (`op_clamped_index`);
- effects: `jax.debug.callback(log.at(k), ...)`, ordered or not, appends what it receives to the
  program's `CallbackLog` (`Program.log`), so a planned run's log can be compared with jit's.

The program is emitted as Python source and built with `exec`, so the listing is exactly
what runs. Every assignment is followed by a check of the value's shape and dtype at trace
time, so a generator bug shows up as such, not as a library failure.

Numerics are kept meaningful for a tolerance of rtol 2e-5:

- every float value has a bound on its magnitude; an op whose bound would exceed 8 is
  scaled by a power of two (exact), so absolute rounding errors stay near float32's eps;
- only values computed without rounding ("exact": arguments, negation, max, slicing, ...)
  are compared or converted to integers; integer and bool values are always exact, so
  every predicate, loop exit, branch index and dynamic index is computed exactly;
- functions under `jax.grad` use smooth float ops only (see `_Scope.smooth`), and gradients
  are squashed by tanh.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

F_LIMIT = 8.0
"""Float values stay within [-F_LIMIT, F_LIMIT]; larger bounds are scaled down by a power of two."""
I_LIMIT = 1000
"""Integer values stay within [-I_LIMIT, I_LIMIT]; larger bounds are reduced modulo I_MOD."""
I_MOD = 97
MAX_SIZE = 256
"""Largest number of elements of a generated value."""
DIMS, DIM_WEIGHTS = (3, 4), (1, 1)
"""Dimensions of arguments, constants, broadcasts and loop lengths. Eager execution compiles each
distinct (primitive, parameters, shapes) once, at 30-40 ms a compile on a small CPU, so a small
vocabulary of shapes shared by all programs is what keeps hundreds of programs fast. Slicing,
stacking and reductions with keepdims make dimensions 1 and 2; now and then concatenation,
padding and flattening make larger ones (up to MAX_DIM)."""
MAX_DIM = 8


def _shapes_by_size() -> dict[int, list[tuple[int, ...]]]:
    """Shapes made of DIMS by number of elements: the targets of reshapes."""
    shapes: dict[int, list[tuple[int, ...]]] = {}
    for rank in (1, 2, 3):
        for shape in itertools.product(DIMS, repeat=rank):
            shapes.setdefault(math.prod(shape), []).append(shape)
    return shapes


_SHAPES_BY_SIZE = _shapes_by_size()
_KINKS = ("abs", "clip", "relu", "max", "min", "> {1}", "floor", "sign", "sort")
"""Parts of float ops that are not smooth everywhere (see `_Scope.smooth`)."""

_DTYPE = {"f": "float32", "i": "int32", "b": "bool"}
_SHORT = {"float32": "f32", "int32": "i32", "bool": "bool"}


def _check(value, expected: str) -> None:
    """Trace-time check that a generated value has the type the generator tracked."""
    actual = f"{_SHORT.get(str(value.dtype), str(value.dtype))}[{','.join(map(str, value.shape))}]"
    if actual != expected:
        raise AssertionError(f"random program generator bug: value is {actual}, generator expected {expected}")


_NAMESPACE = {"jax": jax, "jnp": jnp, "lax": lax, "np": np, "_check": _check}


class CallbackLog:
    """What a program's `jax.debug.callback`s received. `log.at(tag)` is the callback of the call
    site `tag`: it appends `(tag, [values as numpy arrays])` to `entries` in the order it runs.
    `ordered[tag]` says whether that call site passed `ordered=True`."""

    def __init__(self):
        self.entries: list[tuple[int, list[np.ndarray]]] = []
        self.ordered: dict[int, bool] = {}

    def at(self, tag: int) -> Callable:
        def record(*values):
            self.entries.append((tag, [np.array(v) for v in values]))

        return record

    def clear(self) -> None:
        self.entries.clear()


@dataclass(frozen=True)
class Val:
    """A value of the pool: its name in the source, type, magnitude bound and exactness."""

    name: str
    shape: tuple[int, ...]
    kind: str
    """'f' float32, 'i' int32, 'b' bool."""
    bound: float = 1.0
    """An upper bound of |value| (floats and ints)."""
    exact: bool = True
    """Computed without rounding, so it may be compared or converted exactly (always true for i and b)."""

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def type(self) -> str:
        return f"{_SHORT[_DTYPE[self.kind]]}[{','.join(map(str, self.shape))}]"


@dataclass
class Program:
    """A generated program: iterate it as `(fn, args)`; `describe()` is its source."""

    seed: int
    fn: Callable
    args: tuple
    listing: str
    features: frozenset[str]
    """Constructs the generator put in the program, e.g. 'scan', 'while', 'switch', 'depth2'."""
    log: CallbackLog = field(default_factory=CallbackLog)
    """The log the program's debug callbacks append to (`log.ordered` is empty if it has none)."""

    def __iter__(self):
        return iter((self.fn, self.args))

    def describe(self) -> str:
        return self.listing


def random_program(seed: int) -> Program:
    """The program of `seed`: same seed, same program (source, arguments, IR)."""
    return _Generator(seed).program()


# ---------------------------------------------------------------------------------------------
# source text


@dataclass
class _Line:
    indent: int
    code: str
    checks: list[Val] = field(default_factory=list)


@dataclass
class _Carries:
    """How a loop body yields its carries."""

    params: list[Val]
    """The body's carry parameters."""
    actions: list[tuple]
    """Per position: `("fit",)` a value of the body fitted to the carry; `("param", j)` the body's
    parameter j as it came in (swaps, rotations); `("outside", v)` the value v of the enclosing
    block, closed over; `("same", j)` what position j yields; `("const",)` a constant."""
    captures: list[Val]
    """Values of the enclosing block the body must see."""
    reads: list[int]
    """Positions whose init the body reads (closed over) beside the carry."""


def _tuple(names: Sequence[str]) -> str:
    if len(names) == 1:
        return f"({names[0]},)"
    return "(" + ", ".join(names) + ")"


def _float(x: float) -> str:
    return repr(float(x))


def _literal(array: np.ndarray) -> str:
    dtype = {"f": "np.float32", "i": "np.int32", "b": "np.bool_"}[array.dtype.kind]
    return f"np.array({array.tolist()!r}, {dtype})"


def _index(rank: int, axis: int, text: str) -> str:
    """`[:, :, text]`-style index with `text` at `axis`."""
    parts = [":"] * rank
    parts[axis] = text
    while len(parts) > 1 and parts[-1] == ":":
        parts.pop()
    return "[" + ", ".join(parts) + "]"


# ---------------------------------------------------------------------------------------------
# the generator


class _Generator:
    def __init__(self, seed: int):
        self.seed = seed
        self.rng = random.Random(seed)
        self.data = np.random.default_rng(seed)
        self.counter = 0
        self.budget = self.rng.randint(4, 16)
        self.max_depth = self.rng.choice([2, 3])
        self.features: set[str] = set()
        self.log = CallbackLog()
        self.case_results: set[str] = set()
        """Names of the results of conds and switches, to notice them as loop inits."""

    def name(self, prefix: str = "v") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def random_shape(self, max_rank: int = 3) -> tuple[int, ...]:
        rank = self.rng.choices(range(max_rank + 1), weights=[1, 3, 3, 0.2][: max_rank + 1])[0]
        return tuple(self.rng.choices(DIMS, weights=DIM_WEIGHTS)[0] for _ in range(rank))

    def argument(self, kind: str) -> tuple[Val, object]:
        name = self.name("a")
        if kind != "b" and self.rng.random() < 0.06:
            # a Python scalar: a weakly typed argument
            value = round(float(self.data.uniform(-2, 2)), 3) if kind == "f" else int(self.data.integers(-5, 6))
            return Val(name, (), kind, 2.0 if kind == "f" else 5), value
        shape = self.random_shape()
        if kind == "f":
            value = self.data.uniform(-2, 2, size=shape).astype(np.float32)
            return Val(name, shape, "f", 2.0), value
        if kind == "i":
            return Val(name, shape, "i", 5), self.data.integers(-5, 6, size=shape).astype(np.int32)
        return Val(name, shape, "b"), self.data.random(size=shape) < 0.5

    def program(self) -> Program:
        kinds = ["f"] + [self.rng.choices("fib", weights=[6, 3, 1.5])[0] for _ in range(self.rng.randint(0, 3))]
        if "i" not in kinds and "b" not in kinds and self.rng.random() < 0.6:
            kinds.append("i")
        params, args = zip(*(self.argument(k) for k in kinds))
        top = _Scope(self, list(params), depth=0)
        while self.budget > 0:
            top.step()
        outputs = top.outputs()
        fn_name = f"random_program_{self.seed}"
        signature = [p.name for p in params]
        body = [_Line(0, f"# {p.name}: {p.type}") for p in params]
        if len(params) >= 3 and self.rng.random() < 0.15:
            # a pytree argument: the last two arrays as a tuple
            signature[-2:] = ["pair"]
            body.append(_Line(0, f"{_tuple([p.name for p in params[-2:]])} = pair"))
            args = (*args[:-2], tuple(args[-2:]))
            self.features.add("pytree argument")
        header = [_Line(0, f"def {fn_name}({', '.join(signature)}):")]
        names = [v.name for v in outputs]
        if self.rng.random() < 0.06:
            # a literal output: JAX returns it as a (weakly typed) array
            names.insert(self.rng.randint(0, len(names)), self.rng.choice(["2.5", "3", "True"]))
            self.features.add("literal output")
        if len(names) == 1 and self.rng.random() < 0.5:
            ret = names[0]
        elif len(names) > 1 and self.rng.random() < 0.15:
            ret = "{" + ", ".join(f"'out{k}': {name}" for k, name in enumerate(names)) + "}"
        else:
            ret = _tuple(names)
        lines = header + [_Line(1 + ln.indent, ln.code, ln.checks) for ln in body + top.lines]
        lines.append(_Line(1, f"return {ret}"))
        source = _render(lines, checks=True)
        namespace = dict(_NAMESPACE, log=self.log)
        exec(compile(source, f"<random_program({self.seed})>", "exec"), namespace)
        listing = f"# random_program({self.seed})\n" + _render(lines, checks=False)
        values = [*params, *top.all_values]
        if any(v.kind == "i" for v in values):
            self.features.add("int")
        if any(v.kind == "b" for v in values):
            self.features.add("bool")
        if len(outputs) > 1:
            self.features.add("several outputs")
        return Program(self.seed, namespace[fn_name], tuple(args), listing, frozenset(self.features), self.log)


def _render(lines: list[_Line], checks: bool) -> str:
    out = []
    for line in lines:
        pad = "    " * line.indent
        if checks:
            out.append(pad + line.code)
            out.extend(f"{pad}_check({v.name}, {v.type!r})" for v in line.checks)
        elif line.checks:
            out.append(f"{pad}{line.code}  # {', '.join(v.type for v in line.checks)}")
        else:
            out.append(pad + line.code)
    return "\n".join(out) + "\n"


class _Scope:
    """One block under construction: its value pool and its lines."""

    def __init__(
        self,
        gen: _Generator,
        pool: list[Val],
        depth: int,
        params: Sequence[Val] = (),
        smooth: bool = False,
        in_loop: bool = False,
        index: Val | None = None,
        chain: Sequence[str] = (),
    ):
        self.gen = gen
        self.params = list(params)
        """The block's parameters (loop carries, branch operands), also in the pool."""
        self.smooth = smooth
        """Differentiated (under jax.grad): float ops are smooth, since at a kink (abs, max, clip,
        sort...) a rounding difference would pick a different derivative; no while loops."""
        self.in_loop = in_loop
        """Inside a loop body (at any depth)."""
        self.index = index
        """The round counter of the fori/while loop whose body this is."""
        self.chain = tuple(chain)
        """Control flow methods to nest one in another before anything else (`cf_deep`)."""
        self.rng = gen.rng
        self.pool = list(pool)
        self.inherited = len(pool)
        self.depth = depth
        self.lines: list[_Line] = []
        self.all_values: list[Val] = []
        """Values computed in this block and the blocks nested in it."""

    # -- the pool ------------------------------------------------------------------------------

    def pick(self, pred: Callable[[Val], bool] = lambda v: True, exclude: Sequence[Val] = ()) -> Val | None:
        """A non-empty pool value satisfying `pred`, favouring recent ones (so ops chain)."""
        cands = [v for v in self.pool if v.size > 0 and pred(v) and v not in exclude]
        if not cands:
            return None
        if self.rng.random() < 0.6:
            return self.rng.choice(cands[-3:])
        return self.rng.choice(cands)

    def new_values(self) -> list[Val]:
        return self.pool[self.inherited :]

    def emit(self, expr: str, outs: Sequence[tuple], count: int = 1) -> list[Val]:
        """Add `names = expr` with results of types `outs` = [(shape, kind, bound, exact)]."""
        vals = [Val(self.gen.name(), tuple(shape), kind, bound, exact) for shape, kind, bound, exact in outs]
        lhs = vals[0].name if len(vals) == 1 else ", ".join(v.name for v in vals)
        self.lines.append(_Line(0, f"{lhs} = {expr}", vals))
        self.pool.extend(vals)
        self.all_values.extend(vals)
        self.gen.budget -= count
        return vals

    def out_f(self, expr: str, shape, bound: float, exact: bool = False) -> Val:
        if bound > F_LIMIT:
            scale = 2.0 ** -math.ceil(math.log2(bound / F_LIMIT))
            expr, bound = f"({expr}) * {_float(scale)}", bound * scale
        return self.emit(expr, [(shape, "f", float(bound), exact)])[0]

    def out_i(self, expr: str, shape, bound: float) -> Val:
        if bound > I_LIMIT:
            expr, bound = f"lax.rem({expr}, {I_MOD})", I_MOD - 1
        return self.emit(expr, [(shape, "i", int(bound), True)])[0]

    def out(self, kind: str, expr: str, shape, bound: float = 1.0, exact: bool = True) -> Val:
        if kind == "f":
            return self.out_f(expr, shape, bound, exact)
        if kind == "i":
            return self.out_i(expr, shape, bound)
        return self.emit(expr, [(shape, "b", 1, True)])[0]

    def allowed(self, kind: str, expr: str) -> bool:
        """Whether a float op may be used here: anything, or smooth ops in a differentiated block."""
        return not (self.smooth and kind == "f" and any(k in expr for k in _KINKS))

    def rare(self) -> bool:
        """True now and then: for shapes outside the common vocabulary (see DIMS)."""
        return self.rng.random() < 0.1

    # -- one random op -------------------------------------------------------------------------

    def step(self) -> None:
        ops = [
            (self.op_unary, 14),
            (self.op_binary, 14),
            (self.op_compare_convert, 6),
            (self.op_where, 4),
            (self.op_dot, 7),
            (self.op_reduce, 8),
            (self.op_reshape, 5),
            (self.op_transpose, 4),
            (self.op_broadcast, 3),
            (self.op_squeeze_expand, 2),
            (self.op_concat, 3),
            (self.op_slice, 4),
            (self.op_dynamic_slice, 3),
            (self.op_dynamic_update_slice, 2),
            (self.op_gather_scatter, 3),
            (self.op_pad, 2),
            (self.op_axis, 4),
            (self.op_constant, 3),
            (self.op_random, 0.7),
            (self.op_clamped_index, 4 if self.in_loop else 0.4),
            (self.op_effect, 0 if self.smooth else 1.5),
        ]
        if self.depth == 0 and self.gen.budget >= 4:
            ops.append((self.cf_deep, 3))
        if self.depth < self.gen.max_depth and self.gen.budget >= 3:
            ops += [
                (self.cf_cond_chain, 2),
                (self.cf_rotate, 3.5),
                (self.cf_scan, 5),
                (self.cf_fori, 2),
                (self.cf_while, 0 if self.smooth else 4),
                (self.cf_cond, 3),
                (self.cf_switch, 3),
                (self.cf_call, 2),
                (self.cf_vmap, 3),
                (self.cf_grad, 2),
            ]
        fns, weights = zip(*ops)
        for _ in range(20):
            if self.rng.choices(fns, weights=weights)[0]():
                return
        self.op_constant()

    def fill(self, n: int) -> None:
        if self.chain:
            head, self.chain = self.chain[0], self.chain[1:]
            getattr(self, head)()  # its body or first branch nests the rest of the chain
            self.chain = ()
            n = min(n, 1)
        for _ in range(n):
            if self.gen.budget <= 0:
                return
            self.step()

    # -- elementwise ---------------------------------------------------------------------------

    def op_unary(self) -> bool:
        x = self.pick()
        if x is None:
            return False
        b = x.bound
        if x.kind == "f":
            table = [
                ("jnp.tanh({0})", min(b, 1.0), False),
                ("jnp.sin({0})", min(b, 1.0), False),
                ("jnp.cos({0})", 1.0, False),
                ("jnp.exp(jnp.clip({0}, -4.0, 1.0))", math.e, False),
                ("jnp.exp(jnp.tanh({0}))", math.e, False),
                ("jax.nn.sigmoid({0})", 1.0, False),
                ("jnp.abs({0})", b, x.exact),
                ("-{0}", b, x.exact),
                ("{0} * {0}", b * b, False),
                ("jnp.sqrt(jnp.abs({0}) + 1.0)", math.sqrt(b + 1), False),
                ("jnp.log1p(jnp.abs({0}))", math.log1p(b), False),
                ("jax.nn.relu({0})", b, x.exact),
                ("{0} ** 3", b**3, False),
                ("lax.erf({0})", 1.0, False),
                ("{0} * 0.5 + 0.25", b * 0.5 + 0.25, False),
                ("jnp.clip({0}, -0.5, 0.75)", min(b, 0.75), x.exact),
                ("lax.rsqrt({0} * {0} + 1.0)", 1.0, False),
            ]
            if x.exact:  # rounding an exact value is exact, whatever rounds it
                table += [
                    ("jnp.floor({0})", b + 1, True),
                    ("jnp.sign({0}) * 0.5", 0.5, True),
                    ("{0}.astype(jnp.bfloat16).astype(jnp.float32)", b * 1.01, True),
                    ("{0}.astype(jnp.float16).astype(jnp.float32)", b * 1.01, True),
                ]
            expr, bound, exact = self.rng.choice([t for t in table if self.allowed("f", t[0])])
            self.out_f(expr.format(x.name), x.shape, bound, exact)
        elif x.kind == "i":
            expr, bound = self.rng.choice(
                [
                    ("-{0}", b),
                    ("jnp.abs({0})", b),
                    ("lax.rem({0}, 5)", 4),
                    ("{0} % 5", 4),
                    ("{0} * 3", 3 * b),
                    ("jnp.clip({0}, -3, 3)", min(b, 3)),
                    ("{0} // 2", b),
                    ("{0} >> 1", b),
                    ("~{0}", b + 1),
                    ("lax.integer_pow({0}, 2)", b * b),
                    ("({0}.astype(jnp.int8) * 3).astype(jnp.int32)", 128),
                    ("{0}.astype(jnp.uint8).astype(jnp.int32)", 255),
                ]
            )
            self.out_i(expr.format(x.name), x.shape, bound)
        else:
            self.out("b", f"~{x.name}", x.shape)
        return True

    def partner(self, x: Val, kind: str | None = None) -> Val | None:
        """A pool value broadcastable to `x`'s shape: same shape, a scalar, or a suffix."""
        kind = kind or x.kind
        return self.pick(
            lambda v: v.kind == kind and (v.rank == 0 or v.rank <= x.rank and x.shape[x.rank - v.rank :] == v.shape)
        )

    def op_binary(self) -> bool:
        x = self.pick()
        if x is None:
            return False
        y = self.partner(x)
        if x.kind == "f":
            if y is None:
                c = self.rng.choice([0.5, -1.25, 2.0, 0.75])
                b = x.bound
                table = [("{0} + %s", b + abs(c)), ("{0} * %s", b * abs(c)), ("jnp.maximum({0}, %s)", b)]
                expr, bound = self.rng.choice([t for t in table if self.allowed("f", t[0])])
                self.out_f(expr.format(x.name) % _float(c), x.shape, bound, False)
                return True
            b1, b2 = x.bound, y.bound
            expr, bound, exact = self.rng.choice(
                [
                    ("{0} + {1}", b1 + b2, False),
                    ("{0} - {1}", b1 + b2, False),
                    ("{0} * {1}", b1 * b2, False),
                    ("jnp.maximum({0}, {1})", max(b1, b2), x.exact and y.exact),
                    ("jnp.minimum({0}, {1})", max(b1, b2), x.exact and y.exact),
                    ("{0} / (1.0 + jnp.abs({1}))", b1, False),
                    ("{0} / (1.0 + {1} * {1})", b1, False),
                    ("jnp.where({0} > {1}, {0}, {1})", max(b1, b2), x.exact and y.exact),
                    ("lax.atan2({0}, jnp.abs({1}) + 0.5)" if x.shape == y.shape else "{0} - {1}",
                     max(math.pi, b1 + b2), False),
                ]
            )
            if not self.allowed("f", expr):
                expr, bound, exact = "{0} * {1}", b1 * b2, False
            self.out_f(expr.format(x.name, y.name), x.shape, bound, exact)
        elif x.kind == "i":
            if y is None:
                self.out_i(f"{x.name} + {self.rng.randint(-3, 3)}", x.shape, x.bound + 3)
                return True
            b1, b2 = x.bound, y.bound
            bits = 2 ** math.ceil(math.log2(max(b1, b2) + 1))
            expr, bound = self.rng.choice(
                [
                    ("{0} + {1}", b1 + b2),
                    ("{0} - {1}", b1 + b2),
                    ("{0} * {1}", b1 * b2),
                    ("jnp.maximum({0}, {1})", max(b1, b2)),
                    ("jnp.minimum({0}, {1})", max(b1, b2)),
                    ("{0} & {1}", bits),
                    ("{0} | {1}", bits),
                    ("{0} ^ {1}", bits),
                    ("{0} % (jnp.abs({1}) + 1)", max(b1, b2)),
                    ("jnp.where({0} > {1}, {0}, {1})", max(b1, b2)),
                ]
            )
            self.out_i(expr.format(x.name, y.name), x.shape, bound)
        else:
            if y is None:
                return False
            expr = self.rng.choice(["{0} & {1}", "{0} | {1}", "{0} ^ {1}", "{0} == {1}"])
            self.out("b", expr.format(x.name, y.name), x.shape)
        return True

    def op_compare_convert(self) -> bool:
        x = self.pick()
        if x is None:
            return False
        r = self.rng.random()
        if x.kind == "b":
            if r < 0.5:
                self.out_f(f"{x.name}.astype(jnp.float32)", x.shape, 1.0, True)
            else:
                self.out_i(f"{x.name}.astype(jnp.int32)", x.shape, 1)
        elif x.kind == "i":
            if r < 0.4:
                self.out_f(f"{x.name}.astype(jnp.float32)", x.shape, x.bound, True)
            else:
                y = self.partner(x)
                op = self.rng.choice(["<", "<=", "==", "!=", ">"])
                rhs = y.name if y is not None and r < 0.7 else str(self.rng.randint(-2, 2))
                self.out("b", f"{x.name} {op} {rhs}", x.shape)
        else:
            if not x.exact:
                return False
            if r < 0.3:
                self.out_i(f"{x.name}.astype(jnp.int32)", x.shape, x.bound)
            else:
                y = self.pick(lambda v: v.kind == "f" and v.exact and v.shape == x.shape, exclude=[x])
                op = self.rng.choice(["<", ">=", "==", "!="])
                rhs = y.name if y is not None else _float(self.rng.choice([0.0, 0.5, -1.0]))
                self.out("b", f"{x.name} {op} {rhs}", x.shape)
        return True

    def op_where(self) -> bool:
        c = self.pick(lambda v: v.kind == "b")
        if c is None:
            return False
        x = self.pick(lambda v: v.kind != "b" and c.rank <= v.rank and v.shape[v.rank - c.rank :] == c.shape)
        if x is None:
            return False
        y = self.partner(x)
        other = y.name if y is not None else ("0.0" if x.kind == "f" else "0")
        bound = max(x.bound, y.bound if y else 0)
        exact = x.exact and (y is None or y.exact)
        self.out(x.kind, f"jnp.where({c.name}, {x.name}, {other})", x.shape, bound, exact)
        return True

    # -- linear algebra and reductions ---------------------------------------------------------

    def op_dot(self) -> bool:
        x = self.pick(lambda v: v.kind in "fi" and 1 <= v.rank <= 3 and (v.kind == "f" or self.rng.random() < 0.3))
        if x is None:
            return False
        k = x.shape[-1]
        def fits(v: Val) -> bool:
            if v.kind != x.kind:
                return False
            if v.rank == 3:  # a batched matmul
                return x.rank == 3 and v.shape[:2] == (x.shape[0], k)
            return v.rank in (1, 2) and v.shape[0] == k and (x.rank < 3 or v.rank == 2)

        y = self.pick(fits)
        if y is None or self.rng.random() < 0.3:
            # with itself: always compatible
            if x.rank == 1:
                expr, shape = self.rng.choice([("jnp.dot({0}, {0})", ()), ("jnp.outer({0}, {0})", (k, k))])
            elif x.rank == 2:
                expr, shape = self.rng.choice([("{0} @ {0}.T", (x.shape[0],) * 2), ("{0}.T @ {0}", (k, k))])
            else:
                expr, shape = "jnp.einsum('bij,bkj->bik', {0}, {0})", (x.shape[0], x.shape[1], x.shape[1])
            expr = expr.format(x.name)
            bound = x.bound * x.bound * (1 if "outer" in expr else k)
        else:
            shape = x.shape[:-1] + (y.shape[1:] if y.rank == 2 else y.shape[2:] if y.rank == 3 else ())
            if x.rank == 3 and y.rank == 3:
                expr = f"jnp.matmul({x.name}, {y.name})"
            elif self.rng.random() < 0.5:
                expr = f"{x.name} @ {y.name}"
            else:
                dims = (((x.rank - 1,), (0,)), ((), ()))
                expr = f"lax.dot_general({x.name}, {y.name}, {dims})"
            bound = x.bound * y.bound * k
        self.out(x.kind, expr, shape, bound, False)
        return True

    def op_reduce(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        r = self.rng.random()
        if r < 0.2:
            axes = tuple(range(x.rank))
            axis_text = ""
        elif r < 0.35 and x.rank >= 2:
            axes = tuple(sorted(self.rng.sample(range(x.rank), 2)))
            axis_text = f", axis={axes}"
        else:
            axes = (self.rng.randrange(x.rank),)
            axis_text = f", axis={axes[0]}"
        keepdims = self.rng.random() < 0.1
        n = math.prod(x.shape[a] for a in axes)
        shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape)) if keepdims else tuple(
            d for a, d in enumerate(x.shape) if a not in axes
        )
        kd = ", keepdims=True" if keepdims else ""
        if x.kind == "b":
            fn = self.rng.choice(["jnp.any", "jnp.all", "jnp.sum"])
            if fn == "jnp.sum":
                self.out_i(f"jnp.sum({x.name}{axis_text}{kd})", shape, n)
            else:
                self.out("b", f"{fn}({x.name}{axis_text}{kd})", shape)
            return True
        choices = ["sum", "max", "min"] + (["mean"] if x.kind == "f" else [])
        if x.exact and len(axes) == 1:
            choices.append("argmax")
        choices = [c for c in choices if self.allowed(x.kind, c)]
        fn = self.rng.choice(choices)
        if fn == "argmax":
            which = self.rng.choice(["argmax", "argmin"])
            self.out_i(f"jnp.{which}({x.name}, axis={axes[0]}{kd})", shape, x.shape[axes[0]])
        elif fn == "sum":
            self.out(x.kind, f"jnp.sum({x.name}{axis_text}{kd})", shape, x.bound * n, False)
        elif fn == "mean":
            self.out_f(f"jnp.mean({x.name}{axis_text}{kd})", shape, x.bound, False)
        else:
            self.out(x.kind, f"jnp.{fn}({x.name}{axis_text}{kd})", shape, x.bound, x.exact)
        return True

    # -- shapes --------------------------------------------------------------------------------

    def op_reshape(self) -> bool:
        x = self.pick(lambda v: v.rank > 0)
        if x is None:
            return False
        targets = [t for t in _SHAPES_BY_SIZE.get(x.size, []) if t != x.shape]
        if x.size == 1:
            targets.append(())
        if x.rank > 1 and (x.size <= max(DIMS) or self.rare()) and (not targets or self.rng.random() < 0.3):
            dims = (x.size,)
            expr = f"{x.name}.ravel()"
        elif targets:
            dims = self.rng.choice(targets)
            expr = f"{x.name}.reshape({dims})"
        else:
            return False
        self.out(x.kind, expr, dims, x.bound, x.exact)
        return True

    def op_transpose(self) -> bool:
        x = self.pick(lambda v: v.rank >= 2)
        if x is None:
            return False
        if x.rank == 2 or self.rng.random() < 0.3:
            perm = tuple(reversed(range(x.rank)))
            expr = f"{x.name}.T"
        else:
            perm = tuple(range(x.rank))
            while perm == tuple(range(x.rank)):
                perm = tuple(self.rng.sample(range(x.rank), x.rank))
            expr = f"jnp.transpose({x.name}, {perm})"
        self.out(x.kind, expr, tuple(x.shape[p] for p in perm), x.bound, x.exact)
        return True

    def op_broadcast(self) -> bool:
        x = self.pick(lambda v: v.rank <= 2)
        if x is None:
            return False
        ones = [a for a, d in enumerate(x.shape) if d == 1]
        d = self.rng.choice(DIMS[1:])
        if ones and self.rng.random() < 0.5:
            a = self.rng.choice(ones)
            shape = x.shape[:a] + (d,) + x.shape[a + 1 :]
        else:
            shape = (d,) + x.shape
        if math.prod(shape) > MAX_SIZE:
            return False
        self.out(x.kind, f"jnp.broadcast_to({x.name}, {shape})", shape, x.bound, x.exact)
        return True

    def op_squeeze_expand(self) -> bool:
        x = self.pick()
        if x is None:
            return False
        ones = [a for a, d in enumerate(x.shape) if d == 1]
        if ones and self.rng.random() < 0.6:
            a = self.rng.choice(ones)
            self.out(x.kind, f"jnp.squeeze({x.name}, axis={a})", x.shape[:a] + x.shape[a + 1 :], x.bound, x.exact)
        elif x.rank < 4:
            a = self.rng.randint(0, x.rank)
            expr = f"{x.name}[None]" if a == 0 and self.rng.random() < 0.5 else f"jnp.expand_dims({x.name}, {a})"
            self.out(x.kind, expr, x.shape[:a] + (1,) + x.shape[a:], x.bound, x.exact)
        else:
            return False
        return True

    def op_concat(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        a = self.rng.randrange(x.rank)

        def fits(v: Val) -> bool:
            same = all(d == e for i, (d, e) in enumerate(zip(v.shape, x.shape)) if i != a)
            return v.kind == x.kind and v.rank == x.rank and same and v.shape[a] + x.shape[a] <= limit

        limit = MAX_DIM if self.rare() else max(DIMS)
        y = self.pick(fits)
        if y is None:
            if 2 * x.shape[a] > limit:
                return False
            y = x
        if x.shape == y.shape and x.rank <= 2 and self.rng.random() < 0.3:
            expr, shape = f"jnp.stack([{x.name}, {y.name}], axis={a})", x.shape[:a] + (2,) + x.shape[a:]
        else:
            shape = x.shape[:a] + (x.shape[a] + y.shape[a],) + x.shape[a + 1 :]
            expr = f"jnp.concatenate([{x.name}, {y.name}], axis={a})"
        self.out(x.kind, expr, shape, max(x.bound, y.bound), x.exact and y.exact)
        return True

    def op_slice(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1 and max(v.shape) > 1)
        if x is None:
            return False
        a = self.rng.choice([i for i, d in enumerate(x.shape) if d > 1])
        n = x.shape[a]
        r = self.rng.random()
        if r < 0.2:
            text, m = "::2", (n + 1) // 2
        elif r < 0.3:
            text, m = "::-1", n
        elif r < 0.6:
            text, m = "1:", n - 1
        else:
            m = self.rng.randint(1, n - 1)
            text = f":{m}"
        expr = x.name + _index(x.rank, a, text)
        self.out(x.kind, expr, x.shape[:a] + (m,) + x.shape[a + 1 :], x.bound, x.exact)
        return True

    def int_scalar(self) -> Val | None:
        """An int32 scalar of the pool, or one made from an int or bool array of it."""
        v = self.pick(lambda v: v.kind == "i" and v.rank == 0)
        if v is not None and self.rng.random() < 0.7:
            return v
        src = self.pick(lambda v: v.kind in "ib" and v.rank >= 1)
        if src is None:
            return v
        if src.kind == "b":
            return self.out_i(f"jnp.sum({src.name})", (), src.size)
        expr, bound = self.rng.choice(
            [(f"jnp.sum({src.name})", src.bound * src.size), (f"jnp.max({src.name})", src.bound),
             (f"{src.name}[{', '.join(['0'] * src.rank)}]", src.bound)]
        )
        return self.out_i(expr, (), bound)

    def bool_scalar(self) -> Val | None:
        """A bool scalar of the pool, or one computed exactly from an int, bool or exact float value."""
        v = self.pick(lambda v: v.kind == "b" and v.rank == 0)
        if v is not None and self.rng.random() < 0.7:
            return v
        src = self.pick(lambda v: v.kind in "ib" or v.exact)
        if src is None:
            return v
        if src.kind == "b":
            return self.out("b", f"{self.rng.choice(['jnp.any', 'jnp.all'])}({src.name})", ())
        if src.kind == "i":
            expr = self.rng.choice(["jnp.sum({0}) > 0", "lax.rem(jnp.max({0}), 2) == 0", "jnp.min({0}) < -1"])
        else:
            expr = self.rng.choice(["jnp.max({0}) > 0.5", "jnp.sum({0} > 0.0) > 1"])
        return self.out("b", expr.format(src.name), ())

    def op_dynamic_slice(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        i = self.int_scalar()
        if x is None or i is None:
            return False
        a = self.rng.randrange(x.rank)
        if self.rng.random() < 0.4 and a == 0:
            self.out(x.kind, f"{x.name}[{i.name}]", x.shape[1:], x.bound, x.exact)
            return True
        size = self.rng.randint(1, x.shape[a])
        expr = f"lax.dynamic_slice_in_dim({x.name}, {i.name}, {size}, axis={a})"
        self.out(x.kind, expr, x.shape[:a] + (size,) + x.shape[a + 1 :], x.bound, x.exact)
        return True

    def op_dynamic_update_slice(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        def fits(v: Val) -> bool:
            return v.kind == x.kind and v.rank == x.rank and all(e <= d for e, d in zip(v.shape, x.shape))

        u = self.pick(fits, exclude=[x])
        if u is None:
            return False
        starts = []
        for _ in range(x.rank):
            i = self.pick(lambda v: v.kind == "i" and v.rank == 0) if self.rng.random() < 0.5 else None
            starts.append(i.name if i is not None else str(self.rng.randint(0, 2)))
        expr = f"lax.dynamic_update_slice({x.name}, {u.name}, ({', '.join(starts)},))"
        self.out(x.kind, expr, x.shape, max(x.bound, u.bound), x.exact and u.exact)
        return True

    def op_clamped_index(self) -> bool:
        """dynamic_slice, then now and then dynamic_update_slice, at a start index out of range,
        which JAX clamps: computed from the loop's round counter in loop bodies, else from an int
        scalar, e.g. `i + 4` on an axis of 4 or `-|i| - 1`."""
        x = self.pick(lambda v: v.rank >= 1)
        if self.index is not None and self.rng.random() < 0.7:
            i = self.index
        else:
            i = self.pick(lambda v: v.kind == "i" and v.rank == 0)
        if x is None or i is None:
            return False
        a = self.rng.randrange(x.rank)
        n = x.shape[a]
        starts = [
            (f"{i.name} + {n}", i.bound + n),  # past the end unless i < 0
            (f"jnp.abs({i.name}) + {n}", i.bound + n),  # past the end
            (f"{i.name} * {n + 1} + 1", i.bound * (n + 1) + 1),
            (f"-jnp.abs({i.name}) - 1", i.bound + 1),  # before the start
            (f"{n - 1} - 2 * {i.name}", 2 * i.bound + n),
        ]
        s = self.clamped_start(starts)
        size = self.rng.randint(1, n)
        shape = x.shape[:a] + (size,) + x.shape[a + 1 :]
        w = self.out(x.kind, f"lax.dynamic_slice_in_dim({x.name}, {s.name}, {size}, axis={a})", shape, x.bound, x.exact)
        if self.rng.random() < 0.5:
            text, bound, exact = self.small_change(w)
            t = self.clamped_start(starts) if self.rng.random() < 0.5 else s
            if self.rng.random() < 0.5:
                expr = f"lax.dynamic_update_slice_in_dim({x.name}, {text.format(w.name)}, {t.name}, axis={a})"
            else:
                index = ", ".join(t.name if k == a else "0" for k in range(x.rank))
                expr = f"lax.dynamic_update_slice({x.name}, {text.format(w.name)}, ({index},))"
            self.out(x.kind, expr, x.shape, max(x.bound, bound), x.exact and exact)
        self.gen.features.add("clamped dynamic index")
        if self.in_loop:
            self.gen.features.add("clamped index in loop")
        return True

    def clamped_start(self, starts: list[tuple[str, float]]) -> Val:
        expr, bound = self.rng.choice(starts)
        return self.out_i(expr, (), bound)

    def op_effect(self) -> bool:
        """`jax.debug.callback` of one or two values, now and then ordered: the callback appends what
        it receives to the program's log (`CallbackLog`)."""
        vals = self.pick_distinct(self.rng.choice([1, 1, 2]))
        if not vals:
            return False
        tag = len(self.gen.log.ordered)
        ordered = self.rng.random() < 0.5
        self.gen.log.ordered[tag] = ordered
        flag = ", ordered=True" if ordered else ""
        self.lines.append(_Line(0, f"jax.debug.callback(log.at({tag}), {', '.join(v.name for v in vals)}{flag})"))
        self.gen.budget -= 1
        self.gen.features.add("effect")
        if ordered:
            self.gen.features.add("ordered effect")
        return True

    def op_gather_scatter(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        n = x.shape[0]
        r = self.rng.random()
        if r < 0.4:
            idx = self.pick(lambda v: v.kind == "i" and v.rank == 1)
            if idx is None:
                return False
            a = self.rng.randrange(x.rank)
            shape = x.shape[:a] + idx.shape + x.shape[a + 1 :]
            if math.prod(shape) > MAX_SIZE:
                return False
            expr = f"jnp.take({x.name}, {idx.name}, axis={a}, mode='clip')"
            if self.rng.random() < 0.4 and a == 0:
                expr = f"{x.name}[lax.rem(jnp.abs({idx.name}), {x.shape[0]})]"
            self.out(x.kind, expr, shape, x.bound, x.exact)
        elif r < 0.7 or x.kind == "b":
            i = self.int_scalar()
            index = i.name if i is not None else str(self.rng.randrange(n))
            if x.kind == "f":
                value = self.pick(lambda v: v.kind == "f" and v.rank == 0)
                text, bound, exact = (value.name, value.bound, value.exact) if value else ("0.5", 0.5, True)
            elif x.kind == "i":
                value = self.pick(lambda v: v.kind == "i" and v.rank == 0)
                text, bound, exact = (value.name, value.bound, True) if value else ("7", 7, True)
            else:
                text, bound, exact = "True", 1, True
            methods = ["set", "set", "max", "min"] if x.kind != "b" and self.allowed(x.kind, "max") else ["set"]
            method = self.rng.choice(methods)
            self.out(x.kind, f"{x.name}.at[{index}].{method}({text})", x.shape, max(x.bound, bound), x.exact and exact)
        else:
            idx = self.pick(lambda v: v.kind == "i" and v.rank == 1)
            if idx is None:
                return False
            c = self.rng.choice([1, 2]) if x.kind == "i" else self.rng.choice([0.5, 1.0])
            expr = f"{x.name}.at[jnp.clip({idx.name}, 0, {n - 1})].add({c})"
            self.out(x.kind, expr, x.shape, x.bound + idx.size * c, x.kind == "i")
        return True

    def op_pad(self) -> bool:
        x = self.pick(lambda v: 1 <= v.rank and v.kind != "b")
        if x is None:
            return False
        pattern = self.rng.choice([(1, 1, 0), (0, 1, 0), (1, 0, 0), (0, 0, 1)])
        axis = self.rng.randrange(x.rank)
        config = [pattern if a == axis else (0, 0, 0) for a in range(x.rank)]
        shape = tuple(lo + hi + d + max(d - 1, 0) * i for d, (lo, hi, i) in zip(x.shape, config))
        if shape[axis] > (MAX_DIM if self.rare() else max(DIMS)):
            return False
        if any(i for _, _, i in config) or self.rng.random() < 0.5:
            expr = f"lax.pad({x.name}, jnp.zeros((), {x.name}.dtype), {config})"
        else:
            expr = f"jnp.pad({x.name}, {[(lo, hi) for lo, hi, _ in config]})"
        self.out(x.kind, expr, shape, x.bound, x.exact)
        return True

    def op_axis(self) -> bool:
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        a = self.rng.randrange(x.rank)
        n = x.shape[a]
        if x.kind == "b":
            self.out("b", f"jnp.flip({x.name}, axis={a})", x.shape)
            return True
        table = [
            (f"jnp.cumsum({x.name}, axis={a})", x.bound * n, x.kind == "i"),
            (f"jnp.sort({x.name}, axis={a})", x.bound, x.exact),
            (f"jnp.flip({x.name}, axis={a})", x.bound, x.exact),
            (f"lax.cummax({x.name}, axis={a})", x.bound, x.exact),
        ]
        if x.kind == "f":
            table.append((f"jax.nn.softmax({x.name}, axis={a})", 1.0, False))
        expr, bound, exact = self.rng.choice([t for t in table if self.allowed(x.kind, t[0])])
        self.out(x.kind, expr, x.shape, bound, exact)
        return True

    def op_constant(self) -> bool:
        r = self.rng.random()
        if r < 0.25:
            n = self.rng.choice(DIMS)
            self.out_i(f"jnp.arange({n}, dtype=jnp.int32)", (n,), n)
        elif r < 0.4:
            shape = self.gen.random_shape(2)
            d = self.rng.randrange(len(shape)) if shape else None
            if d is None:
                self.out_f("jnp.full((), 1.5, jnp.float32)", (), 1.5, True)
            else:
                self.out_i(f"lax.broadcasted_iota(jnp.int32, {shape}, {d})", shape, shape[d])
        else:
            kind = self.rng.choices("fib", weights=[5, 2, 1])[0]
            shape = self.gen.random_shape(2)
            data = self.gen.data
            if kind == "f":
                array = (data.integers(-8, 9, size=shape) / 4).astype(np.float32)
                bound = 2.0
            elif kind == "i":
                array, bound = data.integers(-4, 5, size=shape).astype(np.int32), 4
            else:
                array, bound = data.random(size=shape) < 0.5, 1
            x = self.pick(lambda v: v.kind == kind and v.shape == shape)
            text = f"jnp.asarray({_literal(np.asarray(array))})"
            if x is not None and kind != "b":
                self.out(kind, f"{x.name} + {text}", shape, x.bound + bound, False if kind == "f" else True)
            else:
                self.out(kind, text, shape, bound, True)
        return True

    # -- control flow --------------------------------------------------------------------------

    def child(self, params: list[Val], captures: Sequence[Val] = (), index: Val | None = None) -> _Scope:
        """A loop body seeing `params`, `captures` and a few more values of this pool (closed over)."""
        cands = [v for v in self.pool if v.size > 0]
        captured = self.rng.sample(cands, min(len(cands), self.rng.randint(0, 3)))
        exact_ints = [v for v in cands if v.kind in "ib" and v not in captured]
        if exact_ints and not any(v.kind in "ib" for v in captured + params) and self.rng.random() < 0.7:
            captured.append(self.rng.choice(exact_ints))
        captured += [v for v in captures if v not in captured]
        return _Scope(
            self.gen, captured + params, self.depth + 1, params, self.smooth,
            in_loop=True, index=index, chain=self.chain,
        )

    def body_ops(self) -> int:
        return self.rng.randint(1, 5 if self.depth == 0 else 3)

    def nest(self, child: _Scope, header: Sequence[str]) -> None:
        """Append a `def` (header lines) with `child`'s lines as its body."""
        self.lines.append(_Line(0, header[0]))
        self.lines.extend(_Line(1, text) for text in header[1:])
        self.lines.extend(_Line(1 + ln.indent, ln.code, ln.checks) for ln in child.lines)
        self.all_values.extend(child.all_values)
        self.gen.features.add(f"depth{child.depth}")

    def fit(self, target: Val) -> Val:
        """A value of this pool with `target`'s shape and kind and a bound within target's (clipped if needed)."""
        cands = [v for v in self.pool if v.shape == target.shape and v.kind == target.kind]
        new = [v for v in cands if v in self.new_values()]
        others = [v for v in self.params if v in cands and v != target]
        if others and self.rng.random() < 0.3:
            v = self.rng.choice(others)  # e.g. loop carries that rotate: (a, b) -> (b, a)
            self.gen.features.add("parameter passed on")
        else:
            v = self.rng.choice(new if new and self.rng.random() < 0.8 else cands)
        if v.kind == "f" and v.bound > target.bound and self.smooth:
            b = _float(target.bound)
            v = self.emit(f"jnp.tanh({v.name} / {b}) * {b}", [(v.shape, "f", target.bound, False)], count=0)[0]
        elif v.kind != "b" and v.bound > target.bound:
            bound = target.bound if v.kind == "f" else int(target.bound)
            lo, hi = (_float(-bound), _float(bound)) if v.kind == "f" else (str(-bound), str(bound))
            v = self.emit(f"jnp.clip({v.name}, {lo}, {hi})", [(v.shape, v.kind, target.bound, v.exact)], count=0)[0]
        return v

    def carried(self, inits: Sequence[Val], bounds: Sequence[float] | None = None) -> list[Val]:
        """Loop parameters for `inits` (bounds: theirs unless given): floats become inexact (their
        rounds are not exact)."""
        bounds = [v.bound for v in inits] if bounds is None else bounds
        return [Val(self.gen.name("c"), v.shape, v.kind, b, v.kind != "f") for v, b in zip(inits, bounds)]

    def pick_distinct(self, n: int, pred=lambda v: True) -> list[Val]:
        chosen: list[Val] = []
        for _ in range(n):
            v = self.pick(pred, exclude=chosen)
            if v is not None:
                chosen.append(v)
        return chosen

    def loop_inits(self, n: int) -> list[Val]:
        """`n` operands of a loop or branch; now and then one value is passed twice."""
        inits = self.pick_distinct(n)
        if inits and self.rng.random() < 0.1:
            inits.append(inits[0])
            self.gen.features.add("duplicate operand")
        return inits

    # -- what a loop body yields ----------------------------------------------------------------

    def carry_plan(self, carries: list[Val], actions: list[tuple] | None = None) -> _Carries:
        """How a loop body yields `carries` (see `_Carries`): given `actions`, or mostly a fitted
        value of the body at every position and now and then a closed-over value, the same value
        at two positions or a constant at one, or an init also read inside the body. Positions
        that pass values to each other share one bound, the largest."""
        n = len(carries)
        types = [(v.shape, v.kind) for v in carries]
        captures: list[Val] = []
        reads: list[int] = []
        if any(v.name in self.gen.case_results for v in carries):
            self.gen.features.add("case result as loop init")
        if actions is None:
            actions = [("fit",)] * n
            r = self.rng.random()
            k = self.rng.randrange(n) if n else 0
            pairs = [(j, m) for m in range(n) for j in range(m) if types[j] == types[m]]
            if not n:
                pass
            elif r < 0.09:
                # a value of the enclosing block (the init itself now and then), closed over
                outside = [v for v in self.pool if v.size > 0 and (v.shape, v.kind) == types[k]]
                if outside:
                    actions[k] = ("outside", self.rng.choice(outside))
                    self.gen.features.add("yield closed-over value")
            elif r < 0.15 and pairs:
                j, k = self.rng.choice(pairs)
                actions[k] = ("same", j)
                self.gen.features.add("yield same value twice")
            elif r < 0.21:
                actions[k] = ("const",)
                self.gen.features.add("yield constant")
            elif r < 0.3 and carries[k].size > 0:
                reads.append(k)
                captures.append(carries[k])
                self.gen.features.add("init read in body")
        bounds = [v.bound for v in carries]
        group = list(range(n))  # positions passing values to each other, by union-find

        def root(k: int) -> int:
            while group[k] != k:
                k = group[k]
            return k

        for k, action in enumerate(actions):
            if action[0] in ("param", "same"):
                group[root(k)] = root(action[1])
            elif action[0] == "outside":
                bounds[k] = max(bounds[k], action[1].bound)
                captures.append(action[1])
        top: dict[int, float] = {}
        for k in range(n):
            top[root(k)] = max(top.get(root(k), 0), bounds[k])
        bounds = [top[root(k)] for k in range(n)]
        return _Carries(self.carried(carries, bounds), list(actions), captures, reads)

    def read_inits(self, carries: Sequence[Val], plan: _Carries) -> None:
        """In a loop body: an op reading an init of the loop (closed over) beside its carry."""
        for k in plan.reads:
            init, c = carries[k], plan.params[k]
            if init.kind == "f":
                self.out_f(f"{c.name} - {init.name}", init.shape, c.bound + init.bound)
            elif init.kind == "i":
                self.out_i(f"{c.name} + {init.name}", init.shape, c.bound + init.bound)
            else:
                self.out("b", f"{c.name} ^ {init.name}", init.shape)

    def yields(self, plan: _Carries) -> list[Val]:
        """What this loop body yields for the carries of `plan`."""
        out: list[Val] = []
        for c, action in zip(plan.params, plan.actions):
            if action[0] == "param":
                v = plan.params[action[1]]
            elif action[0] == "outside":
                v = action[1]
            elif action[0] == "same":
                v = out[action[1]]
            elif action[0] == "const":
                v = self.constant_like(c)
            else:
                v = self.fit(c)
            out.append(v)
        return out

    def constant_like(self, c: Val) -> Val:
        """A constant of `c`'s type within its bound: a literal, a `jnp.full` or a closed-over array."""
        shape = c.shape
        if c.kind == "b":
            text = f"jnp.{self.rng.choice(['ones', 'zeros'])}({shape}, jnp.bool_)"
            return self.emit(text, [(shape, "b", 1, True)], count=0)[0]
        dtype = "jnp.float32" if c.kind == "f" else "jnp.int32"
        top = 0.5 if c.kind == "f" else 2
        value = top if c.bound >= top else 0 * top
        if not shape:
            text = f"{dtype}({value!r})"
        elif self.rng.random() < 0.5:
            text = f"jnp.full({shape}, {value!r}, {dtype})"
        else:
            data = self.gen.data.integers(-2, 3, size=shape) * (value != 0)
            array = (data / 4).astype(np.float32) if c.kind == "f" else data.astype(np.int32)
            text = f"jnp.asarray({_literal(array)})"
        return self.emit(text, [(shape, c.kind, value, True)], count=0)[0]

    def read_after(self, operands: Sequence[Val], results: Sequence[Val]) -> None:
        """Now and then read an operand of the loop or case just made again, so it outlives it."""
        fed = [v for v in dict.fromkeys(operands) if v.size > 0]
        if not fed or self.rng.random() >= 0.3:
            return
        v = self.rng.choice(fed)
        other = next((r for r in results if (r.shape, r.kind) == (v.shape, v.kind)), None)
        if v.kind == "f":
            if other is not None:
                self.out_f(f"{v.name} - {other.name}", v.shape, v.bound + other.bound)
            else:
                self.out_f(f"{v.name} * 0.5", v.shape, v.bound * 0.5, v.exact)
        elif v.kind == "i":
            if other is not None:
                self.out_i(f"{v.name} - {other.name}", v.shape, v.bound + other.bound)
            else:
                self.out_i(f"{v.name} + 2", v.shape, v.bound + 2)
        else:
            self.out("b", f"{v.name} ^ {other.name}" if other is not None else f"~{v.name}", v.shape)
        self.gen.features.add("operand read after")

    def zero_from_data(self) -> Val | None:
        """An int32 scalar that is 0, computed from a value of the pool (for zero-trip loops)."""
        src = self.pick(lambda v: v.kind in "ib" or v.exact)
        if src is None:
            return None
        if src.kind == "b":
            expr = f"jnp.sum({src.name} & ~{src.name})"
        elif src.kind == "i":
            expr = self.rng.choice([f"jnp.max(jnp.abs({src.name})) * 0", f"jnp.sum({src.name} > {int(src.bound)})"])
        else:  # exact: never above its bound
            expr = f"jnp.sum(jnp.abs({src.name}) > {_float(src.bound)})"
        return self.out_i(expr, (), 0)

    # -- loops ---------------------------------------------------------------------------------

    def cf_scan(self, inits: list[Val] | None = None, actions: list[tuple] | None = None) -> bool:
        n = self.gen.name("body")
        max_len = 4 if self.depth == 0 else 3
        xs: list[Val] = []
        length = None
        if inits is not None:
            carries = inits
        elif self.rng.random() < 0.15 and (x := self.pick(lambda v: v.rank >= 1 and v.shape[0] <= max_len)) is not None:
            # the init carry is also the scanned-over xs
            carries = [x, *self.pick_distinct(self.rng.randint(0, 1), lambda v: v != x)]
            xs, length = [x], x.shape[0]
            self.gen.features.add("scan init is xs")
        else:
            carries = self.loop_inits(self.rng.choice([0, 1, 1, 2, 2, 3]))
        r = self.rng.random()
        if length is not None:
            pass
        elif r < 0.2:
            length = 0
            x = self.pick(lambda v: v.rank >= 1)
            if x is not None and self.rng.random() < 0.6:
                xs = self.emit(f"{x.name}[:0]", [((0,) + x.shape[1:], x.kind, x.bound, x.exact)], count=0)
            self.gen.features.add("scan length 0")
        elif r < 0.7:
            x = self.pick(lambda v: v.rank >= 1 and v.shape[0] <= max_len)
            if x is None:
                length = self.rng.choice(DIMS[: max_len])
            else:
                length = x.shape[0]
                more = self.pick_distinct(
                    self.rng.randint(0, 1), lambda v: v.rank >= 1 and v.shape[0] == length and v != x
                )
                xs = [x, *more]
        else:
            length = self.rng.choice(DIMS[: max_len])
        reverse = self.rng.random() < 0.4
        plan = self.carry_plan(carries, actions)
        cparams = plan.params
        xparams = [Val(self.gen.name("x"), v.shape[1:], v.kind, v.bound, v.exact) for v in xs]
        body = self.child(cparams + xparams, plan.captures)
        body.read_inits(carries, plan)
        body.fill(self.body_ops())
        new_carries = body.yields(plan)
        ys = body.pick_distinct(self.rng.choice([0, 1, 1, 2]) if carries else self.rng.randint(1, 2))
        if not carries and not ys:
            ys = [body.fit(body.pool[-1])]
        header = [f"def {n}(carry, x):"]
        if cparams:
            header.append(f"{_tuple([c.name for c in cparams])} = carry")
        if xparams:
            header.append(f"{_tuple([x.name for x in xparams])} = x")
        self.nest(body, header)
        self.lines.append(_Line(1, f"return {_tuple([c.name for c in new_carries])}, {_tuple([y.name for y in ys])}"))
        outs = [(c.shape, c.kind, c.bound, c.kind != "f") for c in cparams]
        outs += [((length,) + y.shape, y.kind, y.bound, y.exact) for y in ys]
        names = [self.gen.name() for _ in outs]
        carry_names, y_names = names[: len(carries)], names[len(carries) :]
        lhs = f"{_tuple(carry_names) if carry_names else '_'}, {_tuple(y_names) if y_names else '_'}"
        xs_text = _tuple([x.name for x in xs]) if xs else "None"
        options = f", length={length}" + (", reverse=True" if reverse else "")
        call = f"lax.scan({n}, {_tuple([c.name for c in carries])}, {xs_text}{options})"
        results = self.assign(lhs, call, names, outs)
        self.gen.features.add("scan")
        if reverse:
            self.gen.features.add("scan reverse")
        self.read_after(carries + xs, results)
        return True

    def assign(self, lhs: str, expr: str, names: Sequence[str], outs: Sequence[tuple]) -> list[Val]:
        vals = [Val(name, tuple(s), k, b, e) for name, (s, k, b, e) in zip(names, outs)]
        self.lines.append(_Line(0, f"{lhs} = {expr}", vals))
        self.pool.extend(vals)
        self.all_values.extend(vals)
        self.gen.budget -= 1
        return vals

    def cf_fori(self, inits: list[Val] | None = None, actions: list[tuple] | None = None) -> bool:
        carries = self.loop_inits(self.rng.randint(1, 3)) if inits is None else inits
        if not carries:
            return False
        n = self.gen.name("body")
        upper = str(self.rng.randint(0, 5 if self.depth == 0 else 3))
        m = self.pick(lambda v: v.kind == "i" and v.rank == 0)
        lower = self.rng.choice([0, 0, 1])
        r = self.rng.random()
        zero = self.zero_from_data() if r < 0.25 and not self.smooth else None
        if zero is not None:
            # no rounds, with a trip count known only at run time
            upper, lower = zero.name, 0
            self.gen.features.add("zero-trip fori")
        elif m is not None and r < 0.6 and not self.smooth:
            upper = f"jnp.clip({m.name}, 0, {upper})"
            self.gen.features.add("fori dynamic")
        i = Val(self.gen.name("i"), (), "i", max(int(upper) if upper.isdigit() else 5, 1))
        plan = self.carry_plan(carries, actions)
        cparams = plan.params
        body = self.child([i] + cparams, plan.captures, index=i)
        body.read_inits(carries, plan)
        body.fill(self.body_ops())
        new_carries = body.yields(plan)
        self.nest(body, [f"def {n}({i.name}, carry):", f"{_tuple([c.name for c in cparams])} = carry"])
        self.lines.append(_Line(1, f"return {_tuple([c.name for c in new_carries])}"))
        outs = [(c.shape, c.kind, c.bound, c.kind != "f") for c in cparams]
        names = [self.gen.name() for _ in outs]
        call = f"lax.fori_loop({lower}, {upper}, {n}, {_tuple([c.name for c in carries])})"
        results = self.assign(_tuple(names), call, names, outs)
        self.gen.features.add("fori")
        self.read_after(carries, results)
        return True

    def cf_while(self, inits: list[Val] | None = None, actions: list[tuple] | None = None) -> bool:
        carries = self.loop_inits(self.rng.randint(1, 3)) if inits is None else inits
        if not carries:
            return False
        n = self.gen.name("loop")
        limit = self.rng.randint(0, 6 if self.depth == 0 else 3)
        plan = self.carry_plan(carries, actions)
        cparams = plan.params
        i_cond, i_body = Val(self.gen.name("i"), (), "i", limit), Val(self.gen.name("i"), (), "i", max(limit, 1))
        cond_params = [Val(self.gen.name("c"), c.shape, c.kind, c.bound, c.exact) for c in cparams]
        test = f"{i_cond.name} < {limit}"
        ints = [k for k, c in enumerate(carries) if c.kind in "ib" and c.size > 0]
        m = self.pick(lambda v: v.kind == "i" and v.rank == 0)
        r = self.rng.random()
        if r < 0.14:
            # false at the start: no rounds
            zero = self.zero_from_data() if self.rng.random() < 0.5 else None
            if zero is not None:
                test = f"{i_cond.name} < {zero.name}"
            elif ints:
                c = cond_params[self.rng.choice(ints)]
                if c.kind == "i":
                    never = f"jnp.max(jnp.abs({c.name})) > {int(c.bound)}"
                else:
                    never = f"jnp.any({c.name} & ~{c.name})"
                test = f"({test}) & ({never})"
            else:
                test = f"{i_cond.name} < 0"
            self.gen.features.add("zero-trip while")
        elif ints and r < 0.48:
            k = self.rng.choice(ints)
            test = f"({test}) & (lax.rem(jnp.sum({cond_params[k].name}), 5) != 3)"
            self.gen.features.add("while data-dependent")
        elif m is not None and r < 0.77:
            test = f"{i_cond.name} < jnp.clip({m.name}, 0, {limit})"
            self.gen.features.add("while data-dependent")
        body = self.child([i_body] + cparams, plan.captures, index=i_body)
        body.read_inits(carries, plan)
        body.fill(self.body_ops())
        new_carries = body.yields(plan)
        state = _tuple([i_cond.name] + [c.name for c in cond_params])
        self.lines += [_Line(0, f"def cond_{n}(state):"), _Line(1, f"{state} = state"), _Line(1, f"return {test}")]
        self.nest(body, [f"def {n}(state):", f"{_tuple([i_body.name] + [c.name for c in cparams])} = state"])
        self.lines.append(_Line(1, f"return {_tuple([i_body.name + ' + 1'] + [c.name for c in new_carries])}"))
        outs = [(c.shape, c.kind, c.bound, c.kind != "f") for c in cparams]
        names = [self.gen.name() for _ in outs]
        call = f"lax.while_loop(cond_{n}, {n}, {_tuple(['jnp.int32(0)'] + [c.name for c in carries])})"
        results = self.assign(_tuple(["_"] + names), call, names, outs)
        self.gen.features.add("while")
        self.read_after(carries, results)
        return True

    def cf_rotate(self) -> bool:
        """A loop whose carries swap, `(a, b) -> (b, a)`, or rotate, `(a, b, c) -> (b, c, a)`, now
        and then with one position computed instead, e.g. `(a, b, c) -> (b, c, f(a))`, and now
        and then with another carry beside them."""
        x = self.pick()
        if x is None:
            return False
        count = self.rng.choice([2, 3])
        group = [x, *self.pick_distinct(count - 1, lambda v: (v.shape, v.kind) == (x.shape, x.kind) and v != x)]
        while len(group) < count:
            y = group[-1]
            expr, bound = {
                "f": (f"{y.name} * -0.5", y.bound * 0.5), "i": (f"{y.name} + 1", y.bound + 1), "b": (f"~{y.name}", 1)
            }[x.kind]
            group.append(self.out(x.kind, expr, x.shape, bound, y.exact))
        perm = [1, 0] if count == 2 else self.rng.choice([[1, 2, 0], [2, 0, 1]])
        actions: list[tuple] = [("param", j) for j in perm]
        r = self.rng.random()
        if r < 0.35:
            actions[self.rng.randrange(count)] = ("fit",)
            self.gen.features.add("carry permutation + computed")
        elif r < 0.5:
            # the same value at two positions: (a, b) -> (f, f), (a, b, c) -> (b, f, f)
            actions[-2:] = [("fit",), ("same", count - 2)]
            self.gen.features.add("yield same value twice")
        else:
            self.gen.features.add("carry swap" if count == 2 else "carry rotation")
        extra = self.pick_distinct(1 if self.rng.random() < 0.3 else 0, lambda v: v not in group)
        actions += [("fit",)] * len(extra)
        loops = [self.cf_fori, self.cf_scan] + ([] if self.smooth else [self.cf_while])
        return self.rng.choice(loops)(inits=group + extra, actions=actions)

    def cf_deep(self) -> bool:
        """Control flow nested four deep, a loop and a case in turn: e.g. a while in a cond in a
        scan in a switch (one branch of each case holds the next level)."""
        loops, cases = ["cf_fori", "cf_scan", "cf_while"], ["cf_cond", "cf_switch"]
        loop_first = self.rng.random() < 0.5
        kinds = [self.rng.choice(loops if (k % 2 == 0) == loop_first else cases) for k in range(4)]
        self.chain = tuple(kinds[1:])
        done = getattr(self, kinds[0])()
        self.chain = ()
        return done

    def branches(
        self, count: int, prefix: str, operands: list[Val] | None = None, batch: int | None = None, lead: str = ""
    ) -> tuple[list[Val], list[str], list[tuple]]:
        """`count` functions over the same operands (their rows if `batch`, for vmap), closing
        over the same values, yielding values of the same types; `lead` names an op method
        each function starts with."""
        if operands is None:
            operands = self.loop_inits(self.rng.randint(0, 3))
        cands = [v for v in self.pool if v.size > 0]
        captured = self.rng.sample(cands, min(len(cands), self.rng.randint(0, 2)))
        if not operands and not captured:
            operands = self.pick_distinct(1)
            if not operands:
                return [], [], []
        param_types = [(v.shape[1:] if batch else v.shape, v.kind, v.bound, v.exact) for v in operands]
        types = sorted({(shape, kind) for shape, kind, _, _ in param_types} | {(v.shape, v.kind) for v in captured})
        out_types = [self.rng.choice(types) for _ in range(self.rng.randint(1, 3))]
        names, chosen = [], []
        for b in range(count):
            params = [Val(self.gen.name("o"), *t) for t in param_types]
            chain = self.chain if b == 0 else ()
            child = _Scope(self.gen, captured + params, self.depth + 1, params, self.smooth, self.in_loop, chain=chain)
            if lead:
                getattr(child, lead)()
            child.fill(self.body_ops() if self.rng.random() < 0.9 else 0)
            results = [child.fit(Val("", s, k, math.inf)) for s, k in out_types]
            name = f"{prefix}_{b}"
            self.nest(child, [f"def {name}({', '.join(p.name for p in params)}):"])
            self.lines.append(_Line(1, f"return {_tuple([r.name for r in results])}"))
            names.append(name)
            chosen.append(results)
        outs = []
        for k, (shape, kind) in enumerate(out_types):
            picks = [c[k] for c in chosen]
            shape = (batch, *shape) if batch else shape
            outs.append((shape, kind, max(p.bound for p in picks), all(p.exact for p in picks)))
        return operands, names, outs

    def cf_cond(self) -> bool:
        pred = self.bool_scalar()
        if pred is None:
            return False
        return self.branching(2, lambda names: f"lax.cond({pred.name}, {names[1]}, {names[0]}", "cond")

    def cf_switch(self) -> bool:
        index = self.int_scalar()
        if index is None:
            return False
        count = self.rng.randint(2, 4)
        return self.branching(count, lambda names: f"lax.switch({index.name}, [{', '.join(names)}]", "switch")

    def branching(self, count: int, call, feature: str) -> bool:
        """`count` branch functions over shared operands, applied by `call(names) + operands + ")"`."""
        operands, names, outs = self.branches(count, self.gen.name("branch"))
        if not names:
            return False
        results = [self.gen.name() for _ in outs]
        args = "".join(f", {v.name}" for v in operands)
        vals = self.assign(_tuple(results), f"{call(names)}{args})", results, outs)
        self.gen.case_results.update(results)
        self.gen.features.add(feature)
        self.read_after(operands, vals)
        return True

    def small_change(self, y: Val) -> tuple[str, float, bool]:
        """A cheap op keeping `y`'s type and its bound within the limits: a template on `{0}`, the
        bound and whether it is exact."""
        b = y.bound
        if y.kind == "f":
            table = [("{0} * 0.5", b * 0.5, y.exact), ("-{0}", b, y.exact), ("jnp.tanh({0})", min(b, 1.0), False)]
            if b + 1.0 <= F_LIMIT:
                table.append(("{0} + 1.0", b + 1.0, False))
        elif y.kind == "i":
            table = [("-{0}", b, True), ("{0} // 2", b, True)]
            if b + 1 <= I_LIMIT:
                table.append(("{0} + 1", b + 1, True))
        else:
            table = [("~{0}", 1, True)]
        return self.rng.choice(table)

    def cf_cond_chain(self) -> bool:
        """Two or three conds (now and then a switch) in a chain, one branch of each handing back
        its operand unchanged: `v2 = lax.cond(p, lambda v: v + 1.0, lambda v: v, v1)`, then the
        same on v2. The result often feeds a loop as an init carry."""
        y = self.pick()
        p = self.bool_scalar()
        if y is None or p is None:
            return False
        for _ in range(self.rng.randint(2, 3)):
            text, bound, exact = self.small_change(y)
            same, change = "lambda v: v", f"lambda v: {text.format('v')}"
            index = self.int_scalar() if self.rng.random() < 0.2 else None
            if index is not None:
                text2, bound2, exact2 = self.small_change(y)
                fns = self.rng.sample([same, change, f"lambda v: {text2.format('v')}"], 3)
                expr = f"lax.switch({index.name}, [{', '.join(fns)}], {y.name})"
                bound, exact = max(bound, bound2), exact and exact2
            else:
                pred = self.rng.choice([p.name, p.name, f"~{p.name}"])
                fns = [change, same] if self.rng.random() < 0.5 else [same, change]
                expr = f"lax.cond({pred}, {fns[0]}, {fns[1]}, {y.name})"
            y = self.out(y.kind, expr, y.shape, max(y.bound, bound), y.exact and exact)
            self.gen.case_results.add(y.name)
        self.gen.features.add("cond passthrough chain")
        if self.rng.random() < 0.5:
            loops = [self.cf_fori, self.cf_scan] + ([] if self.smooth else [self.cf_while])
            self.rng.choice(loops)(inits=[y, *self.pick_distinct(self.rng.randint(0, 1), lambda v: v != y)])
        return True

    def cf_call(self) -> bool:
        wrapper = self.rng.choice(["jax.jit", "jax.checkpoint"])
        operands, names, outs = self.branches(1, self.gen.name("fn"))
        if not names:
            return False
        results = [self.gen.name() for _ in outs]
        args = ", ".join(v.name for v in operands)
        self.assign(_tuple(results), f"{wrapper}({names[0]})({args})", results, outs)
        self.gen.features.add(wrapper)
        return True

    def cf_vmap(self) -> bool:
        """jax.vmap over the rows of one to three values; the body may close over others (unbatched)."""
        x = self.pick(lambda v: v.rank >= 1)
        if x is None:
            return False
        n = x.shape[0]
        more = self.pick_distinct(self.rng.randint(0, 2), lambda v: v.rank >= 1 and v.shape[0] == n and v != x)
        operands = [x, *more]
        lead = ""
        if self.rng.random() < 0.5 and self.depth + 1 < self.gen.max_depth:
            # lane-dependent control flow: a batched predicate, branch index or trip count
            ints = self.pick(lambda v: v.kind == "i" and v.rank == 1 and v.shape[0] == n and v not in operands)
            operands.append(ints or self.out_i(f"jnp.arange({n}, dtype=jnp.int32)", (n,), n))
            lead = self.rng.choice(["cf_fori", "cf_cond", "cf_switch"] + ([] if self.smooth else ["cf_while"] * 2))
        operands, names, outs = self.branches(1, self.gen.name("lane"), operands, batch=n, lead=lead)
        results = [self.gen.name() for _ in outs]
        args = ", ".join(v.name for v in operands)
        self.assign(_tuple(results), f"jax.vmap({names[0]})({args})", results, outs)
        self.gen.features.add("vmap")
        return True

    def cf_grad(self) -> bool:
        """jax.grad of a smooth scalar function of one or two float values (squashed by tanh)."""
        operands = self.pick_distinct(self.rng.randint(1, 2), lambda v: v.kind == "f")
        if not operands:
            return False
        n = self.gen.name("loss")
        params = [Val(self.gen.name("o"), v.shape, "f", v.bound, v.exact) for v in operands]
        cands = [v for v in self.pool if v.size > 0]
        captured = self.rng.sample(cands, min(len(cands), self.rng.randint(0, 2)))
        child = _Scope(self.gen, captured + params, self.depth + 1, params, smooth=True, in_loop=self.in_loop)
        child.fill(self.body_ops())
        floats = [v for v in child.new_values() if v.kind == "f"]
        r = self.rng.choice(floats or params)
        self.nest(child, [f"def {n}({', '.join(p.name for p in params)}):"])
        terms = [f"jnp.sum(jnp.sin({r.name}))"] + [f"jnp.sum(jnp.tanh({p.name}))" for p in params if p != r]
        self.lines.append(_Line(1, f"return {' + '.join(terms)}"))
        argnums = tuple(range(len(operands)))
        results = [self.gen.name() for _ in operands]
        outs = [(v.shape, "f", 1.0, False) for v in operands]
        grads = f"jax.grad({n}, argnums={argnums})({', '.join(v.name for v in operands)})"
        self.assign(_tuple(results), f"jax.tree.map(jnp.tanh, {grads})", results, outs)
        self.gen.features.add("grad")
        return True

    def op_random(self) -> bool:
        """Random numbers from a key made in the program (PRNG key values, threefry)."""
        shape = self.gen.random_shape(2)
        i = self.pick(lambda v: v.kind == "i" and v.rank == 0)
        key = f"jax.random.key({self.rng.randint(0, 9)})"
        if i is not None:
            key = f"jax.random.fold_in({key}, {i.name})"
        r = self.rng.random()
        if r < 0.35:
            self.out_f(f"jax.random.uniform({key}, {shape}, minval=-1.0, maxval=1.0)", shape, 1.0, False)
        elif r < 0.55:
            self.out_i(f"jax.random.randint({key}, {shape}, -3, 4)", shape, 3)
        elif r < 0.7:
            self.out("b", f"jax.random.bernoulli({key}, 0.5, {shape})", shape)
        else:
            # a key carried through a scan
            length = self.rng.choice(DIMS)
            n = self.gen.name("keys")
            self.lines += [
                _Line(0, f"def {n}(key, x):"),
                _Line(1, "key, sub = jax.random.split(key)"),
                _Line(1, f"return key, jax.random.uniform(sub, {shape})"),
            ]
            self.emit(f"lax.scan({n}, {key}, None, length={length})[1]", [((length, *shape), "f", 1.0, False)])
            self.gen.features.add("key carry")
        self.gen.features.add("random")
        return True

    # -- outputs -------------------------------------------------------------------------------

    def outputs(self) -> list[Val]:
        new = [v for v in self.new_values()]
        count = self.rng.choice([1, 2, 2, 3, 4])
        if not new:
            return [self.pool[0]]
        outs = [new[-1]]
        for _ in range(count - 1):
            r = self.rng.random()
            if r < 0.05:
                args = [v for v in self.pool[: self.inherited] if v.rank > 0]
                outs.append(self.rng.choice(args or new))
            elif r < 0.1:
                outs.append(self.rng.choice(outs))
            else:
                outs.append(self.rng.choice(new))
        return outs
