#include "sim/engine/timeline.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <utility>
#include <vector>

#include "hw/pod/pod.h"
#include "sim/engine/engine.h"

namespace podsim {
namespace {

constexpr int kBins = 100;

using Spans = std::vector<std::pair<double, double>>;

double r6(double x) { return std::isfinite(x) ? std::round(x * 1e6) / 1e6 : 0; }

// The union of intervals, as disjoint sorted spans.
Spans merged(Spans v) {
  std::sort(v.begin(), v.end());
  Spans out;
  for (auto [b, e] : v) {
    if (e <= b) continue;
    if (!out.empty() && b <= out.back().second) out.back().second = std::max(out.back().second, e);
    else out.push_back({b, e});
  }
  return out;
}

// Adds `weight` x (time of [b, e) within bin k) to v[k] for every bin the interval overlaps.
class Bins {
 public:
  explicit Bins(double step) : m_w(step > 0 ? step / kBins : 1) {}
  double width() const { return m_w; }
  std::vector<double> zeros() const { return std::vector<double>(kBins, 0.0); }
  void spread(std::vector<double>& v, double b, double e, double weight) const {
    for (int k = std::max(0, static_cast<int>(b / m_w)); k < kBins && k * m_w < e; ++k) {
      double lo = std::max(b, k * m_w), hi = std::min(e, (k + 1) * m_w);
      if (hi > lo) v[k] += (hi - lo) * weight;
    }
  }
  // Each bin's share of its time covered by `spans` (disjoint).
  std::vector<double> covered(const Spans& spans) const {
    std::vector<double> v = zeros();
    for (auto [b, e] : spans) spread(v, b, e, 1.0);
    return v;
  }
  nlohmann::ordered_json fractions(const std::vector<double>& v) const {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (double x : v) a.push_back(r6(x / m_w));
    return a;
  }

 private:
  double m_w;
};

}  // namespace

nlohmann::ordered_json timeline_json(const Prepared& p, const Simulation& s, const Chip& chip) {
  const ChipConfig& cfg = p.exp.hardware.chip;
  const ChipLog& log = chip.log();
  const Bins bins(s.step_time);
  const double cores = static_cast<double>(cfg.tensorcores);

  std::vector<double> mxu = bins.zeros(), vpu = bins.zeros(), hbm = bins.zeros(), ici = bins.zeros();
  int links = 0;
  for (int d = 0; d < p.ctx->torus.directions(); ++d) links += p.ctx->torus.neighbor(chip.id(), d) >= 0;
  // From the whole intervals when the chip keeps them (traced at detail units or links), else from the spans it
  // keeps for this: the same values in the same order per bin array.
  if (log.keep_units) {
    for (const Interval& iv : log.compute) bins.spread(iv.lane < 16 ? mxu : vpu, iv.begin, iv.end, 1.0 / cores);
    for (const Interval& iv : log.hbm)
      if (iv.end > iv.begin) bins.spread(hbm, iv.begin, iv.end, iv.bytes / (iv.end - iv.begin));
    for (const Interval& iv : log.links) bins.spread(ici, iv.begin, iv.end, 1.0 / std::max(links, 1));
  } else {
    for (const ChipLog::Span& x : log.mxu_spans) bins.spread(mxu, x.begin, x.end, 1.0 / cores);
    for (const ChipLog::Span& x : log.vpu_spans) bins.spread(vpu, x.begin, x.end, 1.0 / cores);
    for (const ChipLog::BytesSpan& x : log.hbm_spans)
      if (x.end > x.begin) bins.spread(hbm, x.begin, x.end, x.bytes / (x.end - x.begin));
    for (const ChipLog::Span& x : log.link_spans) bins.spread(ici, x.begin, x.end, 1.0 / std::max(links, 1));
  }

  // Communication and exposed communication, counted as time_breakdown counts them: the op spans, a receive
  // being a wait (the sender's op covers the transfer).
  Spans compute, communication, any;
  if (chip.role() >= 0) {
    const ExecProgram& ep = p.ctx->programs[chip.role()];
    for (size_t i = 0; i < ep.ops.size(); ++i) {
      const OpRecord& r = log.ops[i];
      if (r.start < 0 || ep.ops[i].kind == OpKind::Recv) continue;
      (is_transfer_unit(ep.ops[i].unit) ? communication : compute).push_back({r.start, r.end});
      any.push_back({r.start, r.end});
    }
  }
  const std::vector<double> comm = bins.covered(merged(communication)), busy = bins.covered(merged(any)),
                            comp = bins.covered(merged(compute));
  std::vector<double> exposed = bins.zeros();
  for (int k = 0; k < kBins; ++k) exposed[k] = std::max(0.0, busy[k] - comp[k]);

  nlohmann::ordered_json t;
  t["chip"] = chip.id();
  t["bin_s"] = bins.width();
  t["mxu_busy"] = bins.fractions(mxu);
  t["vpu_busy"] = bins.fractions(vpu);
  t["hbm_Bps"] = bins.fractions(hbm);
  t["ici_busy"] = bins.fractions(ici);
  t["communication"] = bins.fractions(comm);
  t["exposed_communication"] = bins.fractions(exposed);
  return t;
}

}  // namespace podsim
