// stablehlo.if on a predicate given at run time, as JAX prints it (the generic form, its two regions the true and
// false branches): the true branch reads a constant of @main (copied into it), the false branch a parameter
// (passed in). Written for podsim's tests (tests/unit/stablehlo_control_test.cpp).
module @jit_f {
  func.func public @main(%p: tensor<i1>, %x: tensor<4xf32>, %w: tensor<4xf32>) -> (tensor<4xf32> {jax.result_info = ""}) {
    %two = stablehlo.constant dense<2.000000e+00> : tensor<4xf32>
    %0 = "stablehlo.if"(%p) ({
      %1 = stablehlo.negate %x : tensor<4xf32>
      %2 = stablehlo.multiply %1, %two : tensor<4xf32>
      stablehlo.return %2 : tensor<4xf32>
    }, {
      %3 = stablehlo.abs %x : tensor<4xf32>
      %4 = stablehlo.add %3, %w : tensor<4xf32>
      stablehlo.return %4 : tensor<4xf32>
    }) : (tensor<i1>) -> tensor<4xf32>
    return %0 : tensor<4xf32>
  }
}
