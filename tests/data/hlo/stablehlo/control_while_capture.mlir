// A while loop (JAX's pretty form) whose condition reads a constant of @main and whose body reads a parameter and
// a constant of @main (implicit captures): y = x * k^3. Written for podsim's tests.
func.func @main(%x: tensor<4xf32>, %k: tensor<4xf32>) -> tensor<4xf32> {
    %c0 = stablehlo.constant dense<0> : tensor<i32>
    %lim = stablehlo.constant dense<3> : tensor<i32>
    %one = stablehlo.constant dense<1> : tensor<i32>
    %0:2 = stablehlo.while(%i = %c0, %acc = %x) : tensor<i32>, tensor<4xf32>
     cond {
      %1 = stablehlo.compare  LT, %i, %lim : (tensor<i32>, tensor<i32>) -> tensor<i1>
      stablehlo.return %1 : tensor<i1>
    } do {
      %2 = stablehlo.multiply %acc, %k : tensor<4xf32>
      %3 = stablehlo.add %i, %one : tensor<i32>
      stablehlo.return %3, %2 : tensor<i32>, tensor<4xf32>
    }
    return %0#1 : tensor<4xf32>
}
