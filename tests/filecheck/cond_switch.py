# RUN: %python %s | filecheck %s
# cond and switch become jx.case on an i32 index; branch 0 of a boolean cond is the
# false branch; branches read the case operands directly from the enclosing block.
import jax.numpy as jnp
from jax import lax

import jaxalloc


def pick(p, x):
    return lax.cond(p, lambda x: x + 1.0, lambda x: x * 2.0, x)


def three_way(i, x):
    return lax.switch(i, [jnp.sin, jnp.cos, lambda x: x], x)


print(jaxalloc.planned(pick, passes=("jx-dce",)).lower(True, jnp.ones(3)))
print(jaxalloc.planned(three_way, passes=("jx-dce",)).lower(1, jnp.ones(3)))

# CHECK-LABEL: jx.func @pick(%a: tensor<i1>, %b: tensor<3xf32>) -> tensor<3xf32>
# CHECK-NEXT:    %[[I:.*]] = jx.prim "convert_element_type"[{{[0-9]+}}](%a) {new_dtype = "int32", weak_type = "False"} : (tensor<i1>) -> tensor<i32>
# CHECK-NEXT:    %[[R:.*]] = jx.case(%[[I]]) : (tensor<i32>) -> tensor<3xf32> {
# CHECK-NEXT:      %[[TWO:.*]] = jx.const[{{[0-9]+}}] "2.0" : tensor<f32>
# CHECK-NEXT:      %[[F:.*]] = jx.prim "mul"[{{[0-9]+}}](%b, %[[TWO]])
# CHECK-NEXT:      jx.yield %[[F]] : tensor<3xf32>
# CHECK-NEXT:    }, {
# CHECK-NEXT:      %[[ONE:.*]] = jx.const[{{[0-9]+}}] "1.0" : tensor<f32>
# CHECK-NEXT:      %[[T:.*]] = jx.prim "add"[{{[0-9]+}}](%b, %[[ONE]])
# CHECK-NEXT:      jx.yield %[[T]] : tensor<3xf32>
# CHECK-NEXT:    }
# CHECK-NEXT:    jx.yield %[[R]] : tensor<3xf32>

# switch clamps its index before the case: three branches, the last yields its input unchanged.
# CHECK-LABEL: jx.func @three_way(%a: tensor<i32>, %b: tensor<3xf32>) -> tensor<3xf32>
# CHECK:         jx.prim "clamp"
# CHECK:         %[[R:.*]] = jx.case(%{{.*}}) : (tensor<i32>) -> tensor<3xf32> {
# CHECK-NEXT:      %[[S:.*]] = jx.prim "sin"
# CHECK-NEXT:      jx.yield %[[S]] : tensor<3xf32>
# CHECK-NEXT:    }, {
# CHECK-NEXT:      %[[C:.*]] = jx.prim "cos"
# CHECK-NEXT:      jx.yield %[[C]] : tensor<3xf32>
# CHECK-NEXT:    }, {
# CHECK-NEXT:      jx.yield %b : tensor<3xf32>
# CHECK-NEXT:    }
