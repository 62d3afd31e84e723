// Special functions of CHLO that XLA decomposes into elementwise HLO (xla/mlir_hlo chlo_legalize_to_hlo.cc):
// lgamma, digamma, erf_inv. podsim runs each as one elementwise op (one fused kernel, as XLA's decomposition fuses)
// whose vector work is that of the decomposition, counted here op by op; numeric mode computes the function itself
// in double precision (within fp32 rounding of XLA's float approximation).
#pragma once

namespace podsim {

struct SpecialWork {
  double simple = 0, transcendental = 0, divide = 0;  // per element
};

// lgamma (materializeLgamma): reflect = x < 1/2, -x, z = select(reflect, -x, x - 1) [4]; 8 Lanczos terms,
// each (z + i + 1), c_i / it, the running sum [16 + 8 divisions]; t = 7.5 + z, log t = log 7.5 + log1p(z / 7.5)
// [2, a division, log1p]; log y = log sqrt(2 pi) + (z + 1/2 - t / log t) log t + log x [5, a division, log];
// the reflection: |x|, floor, the fraction, > 1/2, 1 - it, select, pi * it, sin, log, is-finite,
// -d + log pi - log y, select [12, sin and log]; select(reflect) [1]; lgamma(+-inf) = inf: |x|, ==, select [3].
constexpr SpecialWork kLgammaWork{4 + 16 + 2 + 5 + 12 + 1 + 3, 1 + 1 + 2, 8 + 1 + 1};

// digamma (materializeDigamma): reflect, -x, z [4]; 8 terms, each (z + i + 1), its square, c_i / square into the
// numerator, c_i / (z + i + 1) into the denominator [32 + 16 divisions]; t, log t [2, a division, log1p];
// y = log t + num / den - 7 / t [2, 2 divisions]; the reflection: x + |floor(x + 1/2)| [4], pi * it, cos, sin,
// pi * cos, / sin, y - it [3, cos and sin, a division]; select(reflect) [1]; poles (x <= 0 and x == floor x: nan)
// [5].
constexpr SpecialWork kDigammaWork{4 + 32 + 2 + 2 + 4 + 3 + 1 + 5, 1 + 2, 16 + 1 + 2 + 1};

// erf_inv (materializeErfInvF32, Giles 2010's single-precision approximation): w = -log1p(-x * x) [3, log1p];
// w < 5, select(w - 2.5, sqrt w - 3) [4, sqrt]; the polynomial's first coefficient selected and 8 steps of a
// selected coefficient, a multiply and an add [1 + 24]; p * x [1]; |x| == 1: x * inf [4].
constexpr SpecialWork kErfInvWork{3 + 4 + 1 + 24 + 1 + 4, 2, 0};

double digamma(double x);  // psi(x); nan at the poles 0, -1, -2, ...
double erf_inv(double x);  // erf^-1(x) on [-1, 1] (+-inf at +-1), nan outside

}  // namespace podsim
