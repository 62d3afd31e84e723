// Numbers of quantized serving (AQT's int8, and fp8 where the chip has it; docs/model.md, "Quantized serving"):
// a value x is stored as q = x / scale rounded to the storage type, and read back as q * scale. The scale of a group
// of values (a weight's output channel, an activation's row, a cached key's head) is absmax / qmax, so the largest
// magnitude maps to the type's largest value: 127 for int8 (symmetric, -128 unused), 448 for fp8 e4m3.
//
//   const float s = quant_scale(absmax, DType::I8);   // absmax / 127 (0 for an all-zero group)
//   const float q = quantize(x, s, DType::I8);        // round-half-to-even of x / s, clipped to [-127, 127]
#pragma once

#include "workloads/tensor_info.h"

namespace podsim {

// Whether values of this type are stored quantized with a scale (int8, fp8).
inline bool quantized_type(DType t) { return t == DType::I8 || t == DType::F8; }
// The largest magnitude of the quantized type: 127 (int8), 448 (fp8 e4m3).
double quant_max(DType t);
float quant_scale(float absmax, DType t);
// x / scale on the type's grid: int8 rounds half to even and clips to [-127, 127]; fp8 rounds to the nearest e4m3
// value (3 mantissa bits, subnormals below 2^-6, saturating at 448). A zero scale gives 0.
float quantize(float x, float scale, DType t);
// The nearest fp8 e4m3 value (ties to even), saturating at +-448.
float round_fp8(float x);

}  // namespace podsim
