"""Lifetimes on each block's schedule, uses in nested regions, and the flattened schedule."""

import jax.numpy as jnp
from jax import lax

import jaxalloc
from jaxalloc.dialects import jx
from jaxalloc.frontend.convert import parse_module
from jaxalloc.analysis.liveness import block_liveness, flat_schedule, last_uses
from jaxalloc.testing.differential import AS_TRACED


def func_of(fn, *args) -> jx.FuncOp:
    return next(iter(jaxalloc.planned(fn, passes=AS_TRACED).lower(*args).ops))


def test_straight_line_lifetimes_are_half_open():
    # %a = arg; %b = sin a (op 0); %c = cos b (op 1); %d = mul b c (op 2); yield d (op 3)
    func = func_of(lambda a: jnp.sin(a) * jnp.cos(jnp.sin(a)), jnp.ones(3))
    block = func.body.block
    ops = list(block.ops)
    assert [op.primitive.data for op in ops[:-1]] == ["sin", "sin", "cos", "mul"]
    live = block_liveness(block)
    a, s1, s2, c, m = block.args[0], ops[0].res[0], ops[1].res[0], ops[2].res[0], ops[3].res[0]
    assert live.interval(a) == (0, 2)  # read by both sins: ops 0 and 1
    assert live.interval(s1) == (0, 4)  # defined at op 0, last read by the mul at op 3
    assert live.interval(s2) == (1, 3)
    assert live.interval(c) == (2, 4)
    assert live.interval(m) == (3, 5)  # read by the yield, op 4


def test_a_value_read_inside_a_loop_lives_until_the_loop_op():
    def fn(x, w):
        k = w * 2.0
        return lax.fori_loop(0, 3, lambda i, c: c @ k, x), w

    func = func_of(fn, jnp.ones((2, 2)), jnp.ones((2, 2)))
    block = func.body.block
    ops = list(block.ops)
    loop = next(i for i, op in enumerate(ops) if isinstance(op, jx.WhileOp))
    mul = next(op for op in ops if isinstance(op, jx.PrimOp) and op.primitive.data == "mul")
    live = block_liveness(block)
    assert live.interval(mul.res[0])[1] == loop + 1
    assert mul.res[0] in last_uses(block)[loop]


def test_the_frontend_emits_no_value_nothing_needs():
    func = func_of(lambda x: (jnp.sin(x), x * 2.0)[1], jnp.ones(3))
    assert [op.primitive.data for op in func.body.block.ops if isinstance(op, jx.PrimOp)] == ["mul"]


def test_unused_values_die_where_they_are_born_and_every_value_dies_once():
    # the frontend removes dead code, so the unused value comes from IR text
    module = parse_module(
        """builtin.module {
  jx.func @f(%x: tensor<3xf32>) -> tensor<3xf32> {
    %s = jx.prim "sin"[0](%x) : (tensor<3xf32>) -> tensor<3xf32>
    jx.yield %x : tensor<3xf32>
  }
}"""
    )
    block = next(iter(module.ops)).body.block
    sin = next(op for op in block.ops if isinstance(op, jx.PrimOp) and op.primitive.data == "sin")
    live = block_liveness(block)
    assert live.interval(sin.res[0]) == (0, 1)
    dying = [v for values in last_uses(block) for v in values]
    assert sorted(map(id, dying)) == sorted(map(id, live.values))


def test_flat_schedule_expands_regions_in_place():
    def fn(x):
        y = jnp.sin(x)
        z = lax.cond(y.sum() > 0, jnp.cos, jnp.tanh, y)
        return z + 1.0

    func = func_of(fn, jnp.ones(3))
    spans = flat_schedule(func)
    case = next(op for op in func.walk() if isinstance(op, jx.CaseOp))
    inner = [op for region in case.regions for op in region.block.ops]
    begin, end = spans[case]
    assert all(begin <= spans[op][0] and spans[op][1] <= end - 1 for op in inner)
    assert end - begin == len(inner) + 1
    steps = sorted(spans[op] for op in func.walk() if op is not func and not op.regions)
    assert [s for s, _ in steps] == sorted(set(s for s, _ in steps))  # one step per op without regions
