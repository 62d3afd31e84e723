#include "sim/serving/iteration_time.h"

#include <algorithm>
#include <cmath>

#include "base/text.h"
#include "workloads/inference.h"

namespace podsim::serving {

std::string shape_text(const Shape& s) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < s.size();) {
    size_t j = i;
    while (j < s.size() && s[j] == s[i]) ++j;
    std::string t = std::to_string(s[i].fresh) + "+" + std::to_string(s[i].cached);
    // A run of more than 4 alike as "N x NEW+CACHED".
    if (j - i > 4) parts.push_back(std::to_string(j - i) + " x " + t);
    else
      for (size_t k = i; k < j; ++k) parts.push_back(t);
    i = j;
  }
  std::string t = join(parts, ",");
  if (s.pad_sequences > 0 || s.pad_tokens > 0)
    t += " + " + std::to_string(s.pad_sequences) + " padded sequences, " + std::to_string(s.pad_tokens) +
         " padded tokens";
  return t;
}

namespace {

// The next grid point above p.
int64_t next_point(int64_t p, int64_t bucket) {
  if (bucket > 0 && p >= bucket) return (p / bucket + 1) * bucket;
  if (p < 1) return 1;
  if (p < 4) return p + 1;  // 1, 2, 3, 4
  int64_t o = 1;
  while (o * 2 <= p) o *= 2;  // p in [o, 2o): the points o, 3o/2, 2o
  const int64_t n = p < o + o / 2 ? o + o / 2 : 2 * o;
  return bucket > 0 && n > bucket ? bucket : n;
}

// One dimension of the interpolation: the points around a value and the weight of the upper one.
struct Dim {
  int64_t lo = 0, hi = 0;
  double w = 0;
};

Dim dim(double x, int64_t bucket, bool from_zero) {
  auto [lo, hi] = grid_bracket(x, bucket, from_zero);
  Dim d{lo, hi, hi > lo ? (x - static_cast<double>(lo)) / static_cast<double>(hi - lo) : 0.0};
  if (d.w == 0) d.hi = d.lo;
  return d;
}

}  // namespace

std::pair<int64_t, int64_t> grid_bracket(double x, int64_t bucket, bool from_zero) {
  int64_t p = from_zero ? 0 : 1;
  for (;;) {
    if (static_cast<double>(p) >= x) return {p, p};
    const int64_t n = next_point(p, bucket);
    if (static_cast<double>(n) >= x) return static_cast<double>(n) == x ? std::make_pair(n, n) : std::make_pair(p, n);
    // Multiples of the bucket: jump straight to the right one.
    if (bucket > 0 && n >= bucket) {
      const int64_t k = static_cast<int64_t>(std::floor(x / static_cast<double>(bucket)));
      const int64_t lo = std::max(n, k * bucket);
      if (static_cast<double>(lo) == x) return {lo, lo};
      return {lo, lo + bucket};
    }
    p = n;
  }
}

namespace {

// The places a shape's chunks compute (their new tokens; a padded prompt's padding is the step's).
int64_t places(const Shape& s) {
  int64_t n = 0;
  for (const Chunk& c : s) n += c.fresh;
  return n;
}

// A stand-in padded to the exact shape's totals of sequences and places, as the engine pads (none where the
// stand-in already has as many).
Shape padded_as(Shape s, const Shape& exact) {
  const int64_t sequences = static_cast<int64_t>(exact.size()) + exact.pad_sequences;
  const int64_t computed = places(exact) + exact.pad_tokens;
  s.pad_sequences = std::max<int64_t>(0, sequences - static_cast<int64_t>(s.size()));
  s.pad_tokens = std::max<int64_t>(0, computed - places(s));
  return s;
}

}  // namespace

std::vector<std::pair<Shape, double>> IterationTimer::stand_ins(const Shape& exact) const {
  std::vector<std::pair<Shape, double>> out = grid_stand_ins(exact);
  if (exact.pad_sequences > 0 || exact.pad_tokens > 0)
    for (auto& [s, w] : out) s = padded_as(s, exact);
  return out;
}

std::vector<std::pair<Shape, double>> IterationTimer::grid_stand_ins(const Shape& exact) const {
  if (m_opts.exact) return {{exact, 1.0}};
  const int64_t b = m_opts.context_bucket;
  int64_t d = 0, ctx = 0, prompts = 0, pfresh = 0, pcached = 0;
  bool fresh_prompts = true, one_length = true;
  for (const Chunk& c : exact) {
    if (c.fresh == 1 && c.cached > 0) {
      ++d;
      ctx += c.cached;
      continue;
    }
    if (prompts > 0 && c.fresh != exact.back().fresh) one_length = false;
    ++prompts;
    pfresh += c.fresh;
    pcached += c.fresh * c.cached;
    if (c.cached > 0) fresh_prompts = false;
  }
  // Each prompt of one prefill alike: as it is; padded: as its padded lengths.
  if (d == 0 && fresh_prompts) {
    for (const Chunk& c : exact)
      if (c.fresh != exact.front().fresh) one_length = false;
    if (m_opts.padding != "none") {
      int64_t longest = 0;
      for (const Chunk& c : exact) longest = std::max(longest, c.fresh);
      Shape s;
      for (const Chunk& c : exact) s.push_back({padded_length(m_opts.padding, c.fresh, longest), 0});
      std::sort(s.begin(), s.end());
      return {{s, 1.0}};
    }
    if (one_length) return {{exact, 1.0}};
  }
  std::vector<Dim> dims;
  enum { kBatch, kContext, kTokens, kPrefillContext, kPromptLength };
  std::vector<int> what;
  if (d > 0) {
    dims.push_back(dim(static_cast<double>(d), 0, false));
    what.push_back(kBatch);
    dims.push_back(dim(static_cast<double>(ctx) / static_cast<double>(d), b, true));
    what.push_back(kContext);
  }
  if (prompts > 0 && d == 0 && fresh_prompts) {
    dims.push_back(dim(static_cast<double>(pfresh) / static_cast<double>(prompts), b, false));
    what.push_back(kPromptLength);
  } else if (prompts > 0) {
    dims.push_back(dim(static_cast<double>(pfresh), 0, false));
    what.push_back(kTokens);
    dims.push_back(dim(static_cast<double>(pcached) / static_cast<double>(pfresh), b, true));
    what.push_back(kPrefillContext);
  }
  std::vector<std::pair<Shape, double>> out;
  const size_t corners = size_t{1} << dims.size();
  for (size_t m = 0; m < corners; ++m) {
    double w = 1;
    std::vector<int64_t> v(dims.size());
    bool skip = false;
    for (size_t k = 0; k < dims.size(); ++k) {
      const bool up = (m >> k) & 1;
      if (up && dims[k].hi == dims[k].lo) skip = true;
      v[k] = up ? dims[k].hi : dims[k].lo;
      w *= up ? dims[k].w : 1 - dims[k].w;
    }
    if (skip || w == 0) continue;
    Shape s;
    int64_t dg = 0, cg = 0, ng = 0, pg = 0, lg = 0;
    for (size_t k = 0; k < dims.size(); ++k) {
      switch (what[k]) {
        case kBatch: dg = v[k]; break;
        case kContext: cg = v[k]; break;
        case kTokens: ng = v[k]; break;
        case kPrefillContext: pg = v[k]; break;
        case kPromptLength: lg = v[k]; break;
      }
    }
    // The grid's decodes: dg sequences of mean context cg, spread over a block of the decode kernel around it, so
    // that the blocks they read are, on average, those of sequences of differing contexts (each reads its last
    // block whole); near the start of the cache, where every context is in its first block, all alike.
    const int64_t B = m_opts.kv_block;
    for (int64_t i = 0; i < dg; ++i)
      s.push_back({1, cg < B ? cg : cg - B / 2 + ((2 * i + 1) * B) / (2 * dg)});
    if (ng > 0) s.push_back({ng, pg});
    for (int64_t i = 0; lg > 0 && i < prompts; ++i) s.push_back({lg, 0});
    std::sort(s.begin(), s.end());
    out.push_back({s, w});
  }
  return out;
}

IterationCost IterationTimer::cost(const Shape& exact) {
  const std::vector<std::pair<Shape, double>> parts = stand_ins(exact);
  std::vector<Shape> missing;
  for (const auto& [s, w] : parts)
    if (!m_cache.count(s) && std::find(missing.begin(), missing.end(), s) == missing.end()) missing.push_back(s);
  if (!missing.empty()) {
    const std::vector<IterationCost> got = m_simulate(missing);
    for (size_t i = 0; i < missing.size(); ++i) m_cache[missing[i]] = got[i];
  }
  IterationCost c;
  for (const auto& [s, w] : parts) {
    const IterationCost& k = m_cache.at(s);
    c.seconds += w * k.seconds;
    c.model_flops += w * k.model_flops;
    c.stream_bytes_per_chip += w * k.stream_bytes_per_chip;
  }
  return c;
}

IterationCost IterationTimer::cost(const Iteration& it, const std::vector<Sequence>&) {
  Shape s;
  for (const Work& w : it.work) s.push_back({w.fresh, w.cached});
  std::sort(s.begin(), s.end());
  s.pad_sequences = it.pad_sequences;
  s.pad_tokens = it.pad_tokens;
  return cost(s);
}

}  // namespace podsim::serving
