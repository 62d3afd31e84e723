// A batch-split dot, bias and sum over 4 devices in Shardy's round-trip form (the meshes and shardings as strings in
// frontend attributes, the Shardy ops as xla.sdy.* custom calls), with a manual computation (GlobalToLocalShape, a
// call of its body, LocalToGlobalShape) and a named computation. Written for podsim's tests
// (tests/unit/stablehlo_control_test.cpp), in the form of XLA's Shardy round-trip lit tests.
module @m attributes {mhlo.num_partitions = 4 : i32, mhlo.frontend_attributes = {xla.sdy.meshes = "{mesh = #sdy.mesh<[\"data\"=4]>}"}} {
  func.func public @main(%x: tensor<16x32xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{\"data\"}, {}]>"}},
                         %w: tensor<32x8xf32> {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding<@mesh, [{}, {}]>"}}) -> tensor<8xf32> {
    %0 = stablehlo.dot_general %x, %w, contracting_dims = [1] x [0] : (tensor<16x32xf32>, tensor<32x8xf32>) -> tensor<16x8xf32>
    %1 = stablehlo.custom_call @Sharding(%0) {mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{\"data\"}, {}]>]>"}} : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %2 = stablehlo.custom_call @xla.sdy.GlobalToLocalShape(%1) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.in_shardings = "#sdy.sharding_per_value<[<@mesh, [{\"data\"}, {}]>]>", xla.sdy.manual_axes = "#sdy<manual_axes{\"data\"}>"}} : (tensor<16x8xf32>) -> tensor<4x8xf32>
    %3 = call @xla.sdy.manual_computation_body(%2) : (tensor<4x8xf32>) -> tensor<4x8xf32>
    %4 = stablehlo.custom_call @xla.sdy.LocalToGlobalShape(%3) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.manual_axes = "#sdy<manual_axes{\"data\"}>", xla.sdy.out_shardings = "#sdy.sharding_per_value<[<@mesh, [{\"data\"}, {}]>]>"}} : (tensor<4x8xf32>) -> tensor<16x8xf32>
    %5 = sdy.named_computation<"bias">(%4) (%arg0: tensor<16x8xf32>) {
      %cst = stablehlo.constant dense<1.0> : tensor<16x8xf32>
      %6 = stablehlo.add %arg0, %cst : tensor<16x8xf32>
      sdy.return %6 : tensor<16x8xf32>
    } : (tensor<16x8xf32>) -> tensor<16x8xf32>
    %c = stablehlo.constant dense<0.0> : tensor<f32>
    %7 = stablehlo.reduce(%5 init: %c) applies stablehlo.add across dimensions = [0] : (tensor<16x8xf32>, tensor<f32>) -> tensor<8xf32>
    %8 = stablehlo.custom_call @xla.sdy.FuncResultSharding(%7) {has_side_effect = true, mhlo.frontend_attributes = {xla.sdy.sharding = "#sdy.sharding_per_value<[<@mesh, [{}]>]>"}} : (tensor<8xf32>) -> tensor<8xf32>
    return %8 : tensor<8xf32>
  }
  func.func private @xla.sdy.manual_computation_body(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {
    %0 = stablehlo.multiply %arg0, %arg0 : tensor<4x8xf32>
    return %0 : tensor<4x8xf32>
  }
}
