#include "sim/serving/run/shape_simulator.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "sim/engine/engine.h"

namespace podsim::serving {
namespace {

ShapeStats g_stats;

std::string list(const std::vector<int64_t>& v) {
  std::vector<std::string> parts;
  for (int64_t x : v) parts.push_back(std::to_string(x));
  std::string t = "[";
  t.append(join(parts, ",")).append("]");
  return t;
}

bool all_equal(const std::vector<int64_t>& v) {
  return std::all_of(v.begin(), v.end(), [&](int64_t x) { return x == v.front(); });
}

// In the child: simulate the step and write its figures (or its error) as JSON to `fd`.
void child(const ShapeFrame& f, const Shape& s, int fd) {
  nlohmann::json out;
  try {
    LoadOptions lo;
    lo.overrides = f.overrides;
    for (std::string& o : shape_overrides(s, f)) lo.overrides.push_back(std::move(o));
    const Experiment e = load_experiment_text(f.yaml, f.label, lo);
    std::unique_ptr<Prepared> p = prepare(e);
    Simulation sim = simulate(*p);
    const nlohmann::json j = nlohmann::json::parse(summary_json(*p, sim));
    out["seconds"] = j["step_time_s"];
    out["model_flops"] = j["model_flops"];
    const auto& inf = j["inference"];
    out["stream_bytes_per_chip"] =
        inf["weight_bytes_per_chip"].get<double>() + inf["kv_bytes_read_per_chip"].get<double>();
    out["activations"] = static_cast<double>(sim.activations);
  } catch (const Error& e) {
    out["error"] = std::string(e.id());
    out["where"] = e.where().str();
    out["message"] = e.message();
  } catch (const std::exception& e) {
    out["error"] = std::string(error_info(Err::Internal).id);
    out["message"] = e.what();
  }
  const std::string text = out.dump();
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  close(fd);
}

struct Child {
  pid_t pid = -1;
  int fd = -1;
  size_t index = 0;
};

Child start(const ShapeFrame& f, const Shape& s, size_t index) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(Err::Internal, "cannot create a pipe for an iteration's simulation");
  const pid_t pid = fork();
  if (pid < 0) throw Error(Err::Internal, "cannot start a process for an iteration's simulation: fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    close(fds[0]);
    child(f, s, fds[1]);
    _exit(0);
  }
  close(fds[1]);
  return {pid, fds[0], index};
}

std::string finish(const Child& c) {
  std::string text;
  char buf[4096];
  for (;;) {
    const ssize_t n = read(c.fd, buf, sizeof buf);
    if (n > 0) text.append(buf, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR) break;
  }
  close(c.fd);
  int status = 0;
  while (waitpid(c.pid, &status, 0) < 0 && errno == EINTR) {
  }
  return text;
}

Err err_of(const std::string& id) {
  for (const ErrorInfo& e : error_catalogue())
    if (e.id == id) return e.err;
  return Err::Internal;
}

}  // namespace

const ShapeStats& shape_stats() { return g_stats; }

std::vector<std::string> shape_overrides(const Shape& s, const ShapeFrame& f) {
  std::vector<int64_t> fresh, cached;
  int64_t need = 0;
  for (const Chunk& c : s) {
    fresh.push_back(c.fresh);
    cached.push_back(c.cached);
    need = std::max(need, c.fresh + c.cached);
  }
  const int64_t n = static_cast<int64_t>(s.size());
  std::vector<std::string> o = {"workload.batch=" + std::to_string(n)};
  const bool no_cache = std::all_of(cached.begin(), cached.end(), [](int64_t c) { return c == 0; });
  const bool decodes = std::all_of(fresh.begin(), fresh.end(), [](int64_t x) { return x == 1; });
  if (no_cache) {
    o.push_back("workload.step=prefill");
    o.push_back(all_equal(fresh) ? "workload.seq_len=" + std::to_string(fresh.front())
                                 : "workload.prompt_lengths=" + list(fresh));
  } else if (decodes) {
    o.push_back("workload.prefill_padding=none");  // the experiment's padding is its prefills'
    o.push_back("workload.step=decode");
    o.push_back(all_equal(cached) ? "workload.context=" + std::to_string(cached.front())
                                  : "workload.context_lengths=" + list(cached));
  } else {
    o.push_back("workload.prefill_padding=none");
    o.push_back("workload.step=mixed");
    std::vector<std::string> parts;
    for (const Chunk& c : s) {
      std::string q = "\"";
      q.append(std::to_string(c.fresh)).append("+").append(std::to_string(c.cached)).append("\"");
      parts.push_back(q);
    }
    std::string t = "workload.chunks=[";
    t.append(join(parts, ",")).append("]");
    o.push_back(t);
  }
  // The engine checked every request against the model's context; a stand-in iteration may hold a longer chunk.
  o.push_back("workload.max_context=" + std::to_string(int64_t{1} << 30));
  o.push_back("workload.kv_capacity=" + std::to_string(std::max(need, f.kv_capacity)));
  o.push_back("workload.kv_sequences=" + std::to_string(std::max(n, f.resident)));
  o.push_back("run.trace.format=off");
  o.push_back("run.numeric=false");
  return o;
}

std::vector<IterationCost> simulate_shapes(const ShapeFrame& f, const std::vector<Shape>& shapes) {
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<std::string> texts(shapes.size());
  std::vector<Child> running;
  size_t next = 0;
  const size_t jobs = static_cast<size_t>(std::max<int64_t>(1, f.jobs));
  while (next < shapes.size() || !running.empty()) {
    while (next < shapes.size() && running.size() < jobs) {
      running.push_back(start(f, shapes[next], next));
      ++next;
    }
    // The oldest first: every child's answer is small and waits in its pipe.
    texts[running.front().index] = finish(running.front());
    running.erase(running.begin());
  }
  std::vector<IterationCost> out;
  for (size_t i = 0; i < shapes.size(); ++i) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(texts[i]);
    } catch (const std::exception&) {
      throw Error(Err::Internal, "the simulation of iteration [" + shape_text(shapes[i]) + "] ended without a result");
    }
    if (j.contains("error"))
      throw Error(err_of(j["error"].get<std::string>()), SourceLocation{"", 0, 0, j.value("where", "")},
                  "an iteration of the serving run (chunks " + shape_text(shapes[i]) +
                      "): " + j["message"].get<std::string>());
    IterationCost c;
    c.seconds = j["seconds"];
    c.model_flops = j["model_flops"];
    c.stream_bytes_per_chip = j["stream_bytes_per_chip"];
    g_stats.activations += j["activations"].get<double>();
    out.push_back(c);
  }
  g_stats.shapes += static_cast<int64_t>(shapes.size());
  g_stats.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace podsim::serving
