// Traces shared by trace_writer_test and trace_check_test: a tiny one that touches every feature of TraceWriter
// (its decoded form is the golden tests/unit/golden/tiny_trace.txt) and a larger pod-like one for the checker.
// Both are deterministic, so gzip and plain outputs can be compared byte for byte.
#pragma once

#include <sys/wait.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "sim/trace/trace_writer.h"

namespace podsim::test {

constexpr uint64_t kTinyFlowIci = 0xC0FFEE0123456789ull;  // above 2^63: JSON must not write it as a number
constexpr uint64_t kTinyFlowBarrier = 2;

// Two chips with Steps / XLA Ops / ICI tracks, a nested Collectives track, a DMA lane group that overflows into a
// second lane, a counter with unit on a chip and one on a pod-level track, args of all three kinds, a flow between
// the chips' ICI slices and one into a zero-length slice.
inline void write_tiny_trace(TraceWriter& w) {
  auto pod = w.global("Pod", -1);
  auto ici_bw = w.counter(pod, "ICI bandwidth", "GB/s", 0, "bandwidth");
  auto stage = w.child(pod, "Pipeline stage 0", 1);

  std::vector<TraceWriter::Track> chips, steps, ops, ici;
  for (int c = 0; c < 2; ++c) {
    chips.push_back(w.process("chip " + std::to_string(c) + " (x=" + std::to_string(c) + ",y=0,z=0)", c + 1, c));
    steps.push_back(w.child(chips[c], "Steps", 0));
    ops.push_back(w.child(chips[c], "XLA Ops", 1));
    ici.push_back(w.child(chips[c], "ICI +x", 2));
  }
  auto mxu = w.counter(chips[0], "MXU utilization", "%", 3, "util");
  auto collectives = w.child(chips[1], "Collectives", 5);
  auto all_reduce = w.child(collectives, "all-reduce.3 [replica group 0]", 0);

  w.slice(stage, 0, 9000, "microbatch 0");
  w.slice(steps[0], 0, 10000, "step 0");
  w.slice(ops[0], 200, 3000, "fusion.1",
          {{"flops", int64_t{1} << 34}, {"bytes/flop", 0.25}, {"note", std::string("quote \" and \xC2\xB5s")}});
  w.slice(ops[0], 3000, 7000, "convolution.2", {{"flops", int64_t{17179869184}}}, {kTinyFlowBarrier});
  w.slice(ops[0], 3500, 4000, "convolution.2/mxu pass");  // nested in convolution.2
  w.slice(ici[0], 7000, 8000, "send all-reduce.3 chunk0", {{"bytes", int64_t{1} << 20}}, {kTinyFlowIci});
  for (auto [ts, v] : {std::pair{0, 0.0}, {200, 35.0}, {3000, 92.5}, {7000, 0.0}}) w.counter_value(mxu, ts, v);
  for (auto [ts, v] : {std::pair{7000, 812.5}, {8200, 0.0}}) w.counter_value(ici_bw, ts, v);

  w.slice(chips[1], 0, 50, "chip 1 reset");  // on the process track itself
  w.slice(steps[1], 0, 10000, "step 0");
  // Three DMA transfers, two of them concurrent: the second one needs a lane of its own, the third reuses lane 1.
  for (auto [b, e] : {std::pair<uint64_t, uint64_t>{100, 900}, {200, 600}, {950, 1200}}) {
    w.slice(w.lane(chips[1], "HBM DMA", b, e, 4), b, e, "dma " + std::to_string(b));
  }
  w.slice(ici[1], 7500, 8200, "recv all-reduce.3 chunk0", {}, {}, {kTinyFlowIci});
  w.slice(ops[1], 8200, 8200, "barrier", {}, {}, {kTinyFlowBarrier});  // zero length, and a flow ends on it
  w.slice(ops[1], 8200, 9500, "all-reduce.3");
  w.slice(all_reduce, 8200, 9500, "all-reduce.3 step 0", {{"algorithm", std::string("ring")}});
}

// What write_tiny_trace() puts in, counted by hand.
inline TraceWriter::Tally tiny_trace_tally() {
  TraceWriter::Tally t;
  t.slices = 15;
  t.counter_values = 6;
  t.flows = 2;
  t.tracks = 16;  // Pod + 2 under it, 2 chips x (process + 3), counter, Collectives + 1, 2 DMA lanes
  return t;
}

// A pod-like trace: `chips` chips, each with Steps, XLA Ops, HBM DMA lanes and ICI +x/-x tracks, an MXU counter
// sampled at every op, and a flow from each chip's +x send to its neighbour's -x receive every 10th chunk.
inline void write_large_trace(TraceWriter& w, int chips, int slices_per_track) {
  auto pod = w.global("Pod", -1);
  auto bw = w.counter(pod, "ICI bandwidth", "GB/s", 0, "bandwidth");
  struct Chip {
    TraceWriter::Track process, steps, ops, send, recv, mxu;
  };
  std::vector<Chip> c(chips);
  for (int i = 0; i < chips; ++i) {
    c[i].process = w.process("chip " + std::to_string(i) + " (x=" + std::to_string(i) + ",y=0,z=0)", i + 1, i);
    c[i].steps = w.child(c[i].process, "Steps", 0);
    c[i].ops = w.child(c[i].process, "XLA Ops", 1);
    c[i].send = w.child(c[i].process, "ICI +x", 3);
    c[i].recv = w.child(c[i].process, "ICI -x", 4);
    c[i].mxu = w.counter(c[i].process, "MXU utilization", "%", 5, "util");
  }
  const uint64_t op_ns = 1000, step_ns = op_ns * slices_per_track;
  for (int i = 0; i < chips; ++i) {
    w.slice(c[i].steps, 0, step_ns, "step 0", {{"step", int64_t{0}}});
    for (int k = 0; k < slices_per_track; ++k) {
      uint64_t b = k * op_ns;
      w.slice(c[i].ops, b, b + op_ns - 7, "fusion." + std::to_string(k % 240), {{"flops", int64_t{k} << 20}});
      w.counter_value(c[i].mxu, b, (k * 37 + i * 11) % 100);
      // Two DMA transfers overlap every op, so the lane group has two lanes.
      w.slice(w.lane(c[i].process, "HBM DMA", b, b + 1500, 2), b, b + 1500, "dma", {{"bytes", int64_t{4096}}});
      std::vector<uint64_t> out;
      if (k % 10 == 0) out.push_back((uint64_t(i + 1) << 32) | uint64_t(k));
      w.slice(c[i].send, b + 100, b + 600, "send chunk " + std::to_string(k), {}, out);
    }
  }
  for (int i = 0; i < chips; ++i) {
    int from = (i + chips - 1) % chips;  // the +x neighbour sends to us
    for (int k = 0; k < slices_per_track; ++k) {
      std::vector<uint64_t> in;
      if (k % 10 == 0) in.push_back((uint64_t(from + 1) << 32) | uint64_t(k));
      uint64_t b = k * op_ns;
      w.slice(c[i].recv, b + 300, b + 800, "recv chunk " + std::to_string(k), {}, {}, in);
    }
  }
  for (uint64_t t = 0; t < step_ns; t += 10 * op_ns) w.counter_value(bw, t, 100.0 + (t / op_ns) % 50);
}

inline std::string read_file(const std::string& path) {
  std::string data;
  if (std::FILE* f = std::fopen(path.c_str(), "rb")) {
    char buf[1 << 16];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) data.append(buf, n);
    std::fclose(f);
  }
  return data;
}

// Runs a shell command; returns its exit status and what it printed on stdout.
inline std::pair<int, std::string> run(const std::string& cmd) {
  std::string out;
  std::FILE* p = popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  char buf[1 << 14];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

}  // namespace podsim::test
