// Helpers for model tests that run whole experiments. SystemC elaborates once per process, so each simulation runs
// in a forked child (the test process itself never elaborates) and sends its summary.json back through a pipe.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"

namespace podsim::test {

// HBM without the losses hw/timing/hbm_timing.h models (refresh, bus turnarounds, the DRAM's own read latency):
// peak bandwidth and the path latency only, so tests of the ICI and of scheduling can count HBM time by hand.
inline const char* kIdealHbmYaml =
    "  chip: {hbm: {refresh_interval: 0s, cas: 0s, rcd: 0s, read_to_write: 0s, write_to_read: 0s}}\n";
inline const std::vector<std::string> kIdealHbm = {
    "hardware.chip.hbm.refresh_interval=0s", "hardware.chip.hbm.cas=0s", "hardware.chip.hbm.rcd=0s",
    "hardware.chip.hbm.read_to_write=0s", "hardware.chip.hbm.write_to_read=0s"};

// Runs `body` in a forked child and returns the JSON it produced; {"error": id, "message": text} when it throws.
template <class Body>
nlohmann::json in_child(Body body) {
  int fds[2];
  if (pipe(fds) != 0) return {{"error", "pipe"}};
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    std::string out;
    try {
      out = body().dump();
    } catch (const Error& e) {
      out = nlohmann::json({{"error", std::string(e.id())}, {"message", e.what()}}).dump();
    } catch (const std::exception& e) {
      out = nlohmann::json({{"error", "exception"}, {"message", e.what()}}).dump();
    }
    size_t off = 0;
    while (off < out.size()) {
      ssize_t n = write(fds[1], out.data() + off, out.size() - off);
      if (n <= 0) break;
      off += static_cast<size_t>(n);
    }
    close(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  std::string text;
  char buf[65536];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  if (text.empty()) return {{"error", "child died"}, {"message", "status " + std::to_string(status)}};
  return nlohmann::json::parse(text);
}

// Simulates one experiment in a child; the summary, or the error.
inline nlohmann::json simulate_in_child(const std::string& yaml, const std::vector<std::string>& sets = {}) {
  return in_child([&] {
    Experiment e = load_experiment_text(yaml, "test.yaml", {sets});
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation s = simulate(*p);
    return nlohmann::json::parse(summary_json(*p, s));
  });
}

inline double op_time(const nlohmann::json& op) {
  return (op["end_ns"].get<double>() - op["start_ns"].get<double>()) * 1e-9;
}

// A point-to-point op (Send or Recv) between this chip and `peer`, matched with its partner by `tag`.
inline Op point_to_point_op(const std::string& name, OpKind kind, TensorId in, TensorId out, int64_t peer,
                            int64_t tag) {
  Op op;
  op.name = name;
  op.kind = kind;
  op.phase = Phase::Communication;
  op.inputs = {in};
  op.outputs = {out};
  op.attrs.peer = peer;
  op.attrs.tag = tag;
  return op;
}

}  // namespace podsim::test
