// A three-way stablehlo.case on a constant index, in the generic form JAX prints. The branches read %x and %y
// from @main (implicit captures). Written for podsim's tests (tests/unit/stablehlo_control_test.cpp).
func.func @main(%x: tensor<8xf32>, %y: tensor<8xf32>) -> tensor<8xf32> {
    %c = stablehlo.constant dense<1> : tensor<i32>
    %0 = "stablehlo.case"(%c) ({
      %1 = stablehlo.add %x, %y : tensor<8xf32>
      stablehlo.return %1 : tensor<8xf32>
    }, {
      %2 = stablehlo.multiply %x, %y : tensor<8xf32>
      %3 = stablehlo.exponential %2 : tensor<8xf32>
      stablehlo.return %3 : tensor<8xf32>
    }, {
      stablehlo.return %x : tensor<8xf32>
    }) : (tensor<i32>) -> tensor<8xf32>
    return %0 : tensor<8xf32>
}
