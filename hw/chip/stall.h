// Random stall injection (run.stall.*): with probability p an HBM access or ICI chunk is delayed by a uniform
// extra latency in [0, max]. It exposes hidden timing assumptions: results must not change and step time must
// not shrink. Each chip draws from its own generator seeded from run.seed and the chip id, so runs repeat.
#pragma once

#include <cstdint>
#include <random>

namespace podsim {

class StallInjector {
 public:
  StallInjector(double probability, double max_seconds, uint64_t seed)
      : m_p(probability), m_max(max_seconds), m_rng(seed ^ 0x9e3779b97f4a7c15ull) {}

  // Extra seconds to add to one transfer (0 most of the time).
  double draw() {
    if (m_p <= 0) return 0;
    double u = unit();
    if (u >= m_p) return 0;
    ++m_count;
    double extra = unit() * m_max;
    m_total += extra;
    return extra;
  }

  uint64_t count() const { return m_count; }
  double total() const { return m_total; }

 private:
  double unit() { return static_cast<double>(m_rng() >> 11) * (1.0 / 9007199254740992.0); }
  double m_p, m_max;
  std::mt19937_64 m_rng;
  uint64_t m_count = 0;
  double m_total = 0;
};

}  // namespace podsim
