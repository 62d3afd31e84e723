// Helpers shared by the convolutional ops' tests.
#pragma once

#include <cstdint>

#include "workloads/op.h"

namespace podsim::test {

// A window of kh x kw with strides sh, sw and paddings top, bottom, left, right.
inline OpAttrs::Window win(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pb, int64_t pl,
                           int64_t pr) {
  OpAttrs::Window w;
  w.kh = kh, w.kw = kw, w.sh = sh, w.sw = sw, w.pt = pt, w.pb = pb, w.pl = pl, w.pr = pr;
  return w;
}

}  // namespace podsim::test
