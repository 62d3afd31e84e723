#include "workloads/quantization.h"

#include <algorithm>
#include <cmath>

namespace podsim {

double quant_max(DType t) { return t == DType::F8 ? 448.0 : 127.0; }

float quant_scale(float absmax, DType t) { return absmax > 0 ? static_cast<float>(absmax / quant_max(t)) : 0.0f; }

float round_fp8(float x) {
  if (!std::isfinite(x)) return x;
  const float a = std::fabs(x);
  if (a == 0) return x;
  // e4m3: exponent bias 7, normals from 2^-6, 3 mantissa bits; below 2^-6 the spacing stays 2^-9 (subnormals).
  int e = 0;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  const int exponent = std::max(e - 1, -6);
  const float step = std::ldexp(1.0f, exponent - 3);
  const float r = std::nearbyint(a / step) * step;  // the current rounding mode: to nearest, ties to even
  return std::copysign(std::min(r, 448.0f), x);
}

float quantize(float x, float scale, DType t) {
  if (scale == 0) return 0;
  const float v = x / scale;
  if (t == DType::F8) return round_fp8(v);
  return std::clamp(std::nearbyint(v), -127.0f, 127.0f);
}

}  // namespace podsim
