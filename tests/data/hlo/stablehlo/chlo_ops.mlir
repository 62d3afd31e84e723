// CHLO ops as JAX leaves them in lowered text (chlo.erf for an exact GELU, a broadcasting add). Written for
// podsim's tests.
func.func @main(%x: tensor<64xf32>, %a: tensor<4x8xf32>, %b: tensor<8xf32>) -> (tensor<64xf32>, tensor<4x8xf32>) {
    %0 = chlo.erf %x : tensor<64xf32> -> tensor<64xf32>
    %1 = chlo.broadcast_add %a, %b {broadcast_dimensions = array<i64: 1>} : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
    return %0, %1 : tensor<64xf32>, tensor<4x8xf32>
}
