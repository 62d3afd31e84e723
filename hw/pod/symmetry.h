// Translation symmetry of a simulated step: when moving every chip by `period[d]` along torus dimension d maps
// each chip's program, collective groups and point-to-point peers onto another chip's (and the routes with
// them), the two chips do the same thing at the same times, and the links leaving them carry the same traffic.
// The pod then simulates one box of period[0] x period[1] x ... chips at the origin; a message that leaves the
// box re-enters it at the opposite side, moved back by one period (hw/pod/pod.h), exactly as the chip it reached
// would have received it. Every other chip reports its representative's timing. The result is the full pod's
// timing, not an estimate: tests/cli/symmetry_test.cpp compares both, figure for figure.
//
//   PodSymmetry s = find_symmetry(ctx);   // s.period == torus dims when nothing repeats
//   int64_t rep = s.representative(chip, ctx.torus);
//
// A translation is a symmetry when, for every chip c: c + t runs the same role; each collective's group at c + t
// is the group at c moved by t, with ranks shifted in a way the collective's schedule is invariant under (ring and
// torus algorithms: a cyclic shift per group dimension; direct all-to-all: a cyclic shift of the linear rank;
// schedules without rank symmetry: no shift); Send/Recv peers move with the chip. Dimension-order routing breaks
// half-way ties by the parity of the coordinate, so along an even ring that some message of the step goes half-way
// round (a peer n/2 away: the direct all-to-all, a strided ring of 2, a shift of n/2) the period is even; where
// every message goes a shorter way (rings and tori of neighbours) it may be 1. Numeric runs (each chip
// holds different values), injected stalls and synthetic traffic (random per chip) keep every chip, and so does a
// trace of any chip outside the box (the default trace covers every chip; run.trace.chips: [0] stays in it). A
// traced box chip names its peers by the box chips that stand for them.
//
// Faults (hardware.faults) break the symmetry only where they are. Two ways keep a smaller set of classes:
// - the faults repeat with the box: each period grows to the smallest multiple that maps every fault onto an
//   equal one (e.g. one slow chip in every second ring);
// - the step never communicates along some torus dimensions (every group and peer lies in the others), so the
//   pod falls apart into independent components, the cosets of those dimensions: a component a fault touches is
//   simulated whole, every other component is stood for by one box of one fault-free component (e.g. rings along
//   x on an X x Y pod with one slow chip: its ring of X chips and one box of the others, X + period_x chips).
// The way with fewer chips wins; otherwise every chip is simulated.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

struct PodContext;
class Torus;

struct PodSymmetry {
  std::vector<int64_t> period;  // per torus dimension
  int64_t simulated = 0;        // chips simulated: the product of the periods
  std::string reason;           // why every chip is simulated, when it is ("" otherwise)
  // Per chip, the chip that stands for it, when the classes are not one box (faults in independent components);
  // empty when `period` says it.
  std::vector<int64_t> map;
  std::string note;             // how faults shaped the classes ("" without faults)

  bool reduced(const Torus& t) const;
  // The chip of the simulated box that stands for `chip`: its coordinates modulo the periods.
  int64_t representative(int64_t chip, const Torus& t) const;
  // "16 of 1024 chips (periods 8 x 2)" or the reason.
  std::string describe(const Torus& t) const;
};

PodSymmetry find_symmetry(const PodContext& ctx);

}  // namespace podsim
