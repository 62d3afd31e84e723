#include "workloads/moe_routing.h"

#include <algorithm>
#include <cmath>

namespace podsim {

void gate_softmax(const float* logits, int64_t E, double* out) {
  double mx = logits[0];
  for (int64_t e = 1; e < E; ++e) mx = std::max<double>(mx, logits[e]);
  double sum = 0;
  for (int64_t e = 0; e < E; ++e) sum += out[e] = std::exp(static_cast<double>(logits[e]) - mx);
  for (int64_t e = 0; e < E; ++e) out[e] /= sum;
}

std::vector<Route> route_group(const std::vector<double>& gates, int64_t S, int64_t E, int64_t C, bool sample_second,
                               const std::function<double(int64_t s)>& uniform) {
  std::vector<Route> r(static_cast<size_t>(S));
  for (int64_t s = 0; s < S; ++s) {
    const double* g = &gates[static_cast<size_t>(s * E)];
    int64_t e1 = 0;
    for (int64_t e = 1; e < E; ++e)
      if (g[e] > g[e1]) e1 = e;
    int64_t e2 = e1 == 0 ? 1 : 0;
    for (int64_t e = 0; e < E; ++e)
      if (e != e1 && g[e] > g[e2]) e2 = e;
    const double denom = g[e1] + g[e2];
    r[s].e1 = e1;
    r[s].e2 = e2;
    r[s].w1 = g[e1] / denom;
    r[s].w2 = g[e2] / denom;
  }
  std::vector<int64_t> count(static_cast<size_t>(E), 0);
  for (Route& t : r) {
    int64_t slot = count[t.e1]++;
    t.slot1 = slot < C ? slot : kOverCapacity;
  }
  for (int64_t& c : count) c = std::min(c, C);  // second choices queue behind the first choices kept
  for (int64_t s = 0; s < S; ++s) {
    Route& t = r[s];
    if (sample_second && !(2.0 * t.w2 > uniform(s))) {
      t.slot2 = kNotSampled;
      continue;
    }
    int64_t slot = count[t.e2]++;
    t.slot2 = slot < C ? slot : kOverCapacity;
  }
  return r;
}

double routing_uniform(uint64_t seed, const std::string& op_name, int64_t token) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : op_name) h = (h ^ c) * 1099511628211ull;
  uint64_t z = seed * 0x9e3779b97f4a7c15ull ^ h ^ (static_cast<uint64_t>(token) + 0x632be59bd9b4e019ull) * 0xbf58476d1ce4e5b9ull;
  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
}

ExpertLoad expert_load(const Tensor& routes, int64_t experts) {
  ExpertLoad l;
  l.first_choice.assign(static_cast<size_t>(experts), 0);
  l.per_expert.assign(static_cast<size_t>(experts), 0);
  const int64_t tokens = routes.elements() / 4;
  for (int64_t t = 0; t < tokens; ++t) {
    const float* r = &routes.data[static_cast<size_t>(t * 4)];
    const auto e1 = static_cast<int64_t>(r[0]), s1 = static_cast<int64_t>(r[1]);
    const auto e2 = static_cast<int64_t>(r[2]), s2 = static_cast<int64_t>(r[3]);
    if (e1 < 0 || e1 >= experts) continue;  // not a token (padding)
    ++l.tokens;
    ++l.first_choice[e1];
    l.requested += 1 + (s2 != kNotSampled);
    l.second_not_sampled += s2 == kNotSampled;
    if (s1 >= 0) ++l.per_expert[e1];
    if (s2 >= 0 && e2 >= 0 && e2 < experts) ++l.per_expert[e2];
    l.routed += (s1 >= 0) + (s2 >= 0);
    l.dropped_tokens += s1 < 0 && s2 < 0;
  }
  return l;
}

}  // namespace podsim
