// The check the gradient tests share: an analytic gradient against central differences of the loss,
// (L(x + h) - L(x - h)) / 2h, one element of a float tensor at a time.
//
//   expect_gradient(s.get(b.grad_of(p)).data, s.get_mut(p).data, forward_loss, {.h = 1e-2, .abs = 2e-4},
//                   g.tensor(p).name);
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <functional>
#include <string>
#include <vector>

namespace podsim {

// The central difference of `loss` in element `e` of `xs` (its value restored after).
inline double central_difference(std::vector<float>& xs, size_t e, double h, const std::function<double()>& loss) {
  const float saved = xs[e];
  xs[e] = static_cast<float>(saved + h);
  const double lp = loss();
  xs[e] = static_cast<float>(saved - h);
  const double lm = loss();
  xs[e] = saved;
  return (lp - lm) / (2 * h);
}

struct GradientCheck {
  double h = 1e-2;                             // the step
  double abs = 2e-3, rel = 2e-2;               // the tolerance: abs + rel * |numeric|
  size_t samples = 0;                          // about this many elements, evenly spaced (0: every element)
  std::function<bool(size_t)> skip = nullptr;  // elements left out (a kink of the function nearby)
};

// Expects `analytic` to match the central differences of `loss` in the sampled elements of `xs`; returns how many
// it checked. `what` names the tensor in a failure.
inline int expect_gradient(const std::vector<float>& analytic, std::vector<float>& xs,
                           const std::function<double()>& loss, const GradientCheck& c, const std::string& what) {
  EXPECT_EQ(analytic.size(), xs.size()) << "the gradient's shape of " << what;
  if (analytic.size() != xs.size()) return 0;
  const size_t step = c.samples == 0 ? 1 : std::max<size_t>(1, xs.size() / c.samples);
  int checked = 0;
  for (size_t e = 0; e < xs.size(); e += step) {
    if (c.skip && c.skip(e)) continue;
    const double numeric = central_difference(xs, e, c.h, loss);
    EXPECT_NEAR(analytic[e], numeric, c.abs + c.rel * std::fabs(numeric)) << what << " element " << e;
    ++checked;
  }
  return checked;
}

}  // namespace podsim
