#include "workloads/ops/special_math.h"

#include <cmath>
#include <limits>

namespace podsim {

double digamma(double x) {
  const double pi = 3.14159265358979323846;
  if (std::isnan(x)) return x;
  if (x <= 0 && x == std::floor(x)) return std::numeric_limits<double>::quiet_NaN();
  if (std::isinf(x)) return x > 0 ? x : std::numeric_limits<double>::quiet_NaN();
  if (x < 0.5) return digamma(1 - x) - pi / std::tan(pi * x);  // psi(1 - x) - psi(x) = pi cot(pi x)
  double r = 0;
  while (x < 10) {  // psi(x) = psi(x + 1) - 1 / x
    r -= 1 / x;
    x += 1;
  }
  // The asymptotic series: log x - 1/(2x) - sum B_2k / (2k x^2k).
  const double f = 1 / (x * x);
  const double tail = f * (1.0 / 12 - f * (1.0 / 120 - f * (1.0 / 252 - f * (1.0 / 240 - f * (1.0 / 132)))));
  return r + std::log(x) - 0.5 / x - tail;
}

double erf_inv(double x) {
  if (std::isnan(x) || x < -1 || x > 1) return std::numeric_limits<double>::quiet_NaN();
  if (x == 1 || x == -1) return x * std::numeric_limits<double>::infinity();
  // Giles' approximation as the start, then Newton's steps on erf(y) = x (erf' = 2/sqrt(pi) e^-y^2).
  double w = -std::log1p(-x * x), p;
  if (w < 5) {
    w -= 2.5;
    p = 2.81022636e-08;
    for (double c : {3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087, -0.00125372503, -0.00417768164,
                     0.246640727, 1.50140941})
      p = c + p * w;
  } else {
    w = std::sqrt(w) - 3;
    p = -0.000200214257;
    for (double c : {0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773, -0.0076224613, 0.00943887047,
                     1.00167406, 2.83297682})
      p = c + p * w;
  }
  double y = p * x;
  const double k = 2 / std::sqrt(3.14159265358979323846);
  for (int i = 0; i < 3; ++i) {
    const double d = k * std::exp(-y * y);
    if (d == 0) break;
    y -= (std::erf(y) - x) / d;
  }
  return y;
}

}  // namespace podsim
