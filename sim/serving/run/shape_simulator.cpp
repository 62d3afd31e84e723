#include "sim/serving/run/shape_simulator.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "base/text.h"
#include "sim/config/loader.h"
#include "hw/pod/pod_context.h"
#include "plan/plan.h"
#include "plan/sharding.h"
#include "sim/engine/engine.h"

namespace podsim::serving {
namespace {

ShapeStats g_stats;
std::map<std::string, std::map<std::string, std::pair<int64_t, double>>> g_collectives;

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

// The part of each dimension of a `shape` tensor that `chip` holds under `spec` (plan/sharding.h: device i of the
// p a dimension is split over holds [i * ceil(n / p), (i + 1) * ceil(n / p)), padding beyond n dropped).
nlohmann::json held(const std::vector<int64_t>& shape, const ShardSpec& spec, const Mesh& m, int64_t chip) {
  nlohmann::json r = nlohmann::json::array();
  for (size_t d = 0; d < shape.size(); ++d) {
    const int64_t n = shape[d];
    if (!spec.splits(d)) {
      r.push_back({0, n});
      continue;
    }
    const int64_t per = ceil_div64(n, split_count(spec, d, m));
    const int64_t i = m.index(chip, spec.dims[d]);
    r.push_back({std::min(n, i * per), std::min(n, (i + 1) * per)});
  }
  return r;
}

// In the child, probe mode: the step planned (not simulated); per chip what it holds of the iteration's KV cache
// (layer0.attn.k_cache [sequences, capacity, kv_heads, head_dim]) and of the weights.
nlohmann::json probe(const Prepared& p) {
  const Plan& plan = p.plan;
  const TensorId kv = p.graph.find_tensor("layer0.attn.k_cache");
  if (kv < 0) throw Error(Err::Internal, "the serving iteration has no KV cache (layer0.attn.k_cache)");
  nlohmann::json chips = nlohmann::json::array();
  nlohmann::json weights = nlohmann::json::object();  // per weight, per chip: [digest of its part, bytes]
  const size_t n = plan.role_of_chip.size();
  for (size_t chip = 0; chip < n; ++chip) {
    const int32_t role = plan.role_of_chip[chip];
    nlohmann::json mine = nullptr;
    if (role >= 0) {
      const Program& prog = plan.programs[static_cast<size_t>(role)];
      for (const TensorBinding& b : prog.inputs) {
        const TensorInfo& t = p.graph.tensor(b.logical);
        if (b.logical == kv) mine = held(t.shape, b.spec, plan.mesh, static_cast<int64_t>(chip));
        if (t.role != TensorRole::Parameter) continue;
        auto& w = weights[t.name];
        if (w.is_null()) w = nlohmann::json::array();
        while (w.size() < chip) w.push_back({"", 0.0});
        const std::string part = held(t.shape, b.spec, plan.mesh, static_cast<int64_t>(chip)).dump();
        w.push_back({std::to_string(std::hash<std::string>{}(part)), prog.graph.tensor(b.local).bytes()});
      }
    }
    chips.push_back(mine);
  }
  for (auto& [name, w] : weights.items())
    while (w.size() < n) w.push_back({"", 0.0});
  return {{"kv_shape", p.graph.tensor(kv).shape}, {"kv_held", chips}, {"weights", weights}};
}

double peak_bytes(const Prepared& p) {
  double peak = 0;
  for (const ExecProgram& ep : p.ctx->programs) peak = std::max(peak, ep.memory.peak_bytes);
  return peak;
}

// In the child: simulate the step and write its figures (or its error) as JSON to `fd`.
void child(const ShapeFrame& f, const Shape& s, int fd, bool probing) {
  nlohmann::json out;
  try {
    LoadOptions lo;
    lo.overrides = f.overrides;
    for (std::string& o : shape_overrides(s, f)) lo.overrides.push_back(std::move(o));
    const Experiment e = load_experiment_text(f.yaml, f.label, lo);
    std::unique_ptr<Prepared> p = prepare(e);
    if (probing) {
      out = probe(*p);
    } else {
      Simulation sim = simulate(*p);
      const nlohmann::json j = nlohmann::json::parse(summary_json(*p, sim));
      out["seconds"] = j["step_time_s"];
      out["model_flops"] = j["model_flops"];
      const auto& inf = j["inference"];
      out["stream_bytes_per_chip"] =
          inf["weight_bytes_per_chip"].get<double>() + inf["kv_bytes_read_per_chip"].get<double>();
      out["activations"] = static_cast<double>(sim.activations);
      // The result chip's collectives by kind: how many, and the bytes a chip moves in them.
      nlohmann::json kinds = nlohmann::json::object();
      if (j.contains("collectives"))
        for (const auto& c : j["collectives"]) {
          auto& k = kinds[c["kind"].get<std::string>()];
          if (k.is_null()) k = {{"count", 0}, {"bytes_per_chip", 0.0}};
          k["count"] = k["count"].get<int64_t>() + 1;
          k["bytes_per_chip"] = k["bytes_per_chip"].get<double>() + c["bytes_per_chip"].get<double>();
        }
      out["collectives"] = kinds;
    }
    out["peak_bytes_per_chip"] = peak_bytes(*p);
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

Child start(const ShapeFrame& f, const Shape& s, size_t index, bool probing = false) {
  int fds[2];
  if (pipe(fds) != 0) throw Error(Err::Internal, "cannot create a pipe for an iteration's simulation");
  const pid_t pid = fork();
  if (pid < 0) throw Error(Err::Internal, "cannot start a process for an iteration's simulation: fork failed");
  if (pid == 0) {
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    close(fds[0]);
    child(f, s, fds[1], probing);
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

nlohmann::json answer(const std::string& text, const Shape& s) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception&) {
    throw Error(Err::Internal, "the simulation of iteration [" + shape_text(s) + "] ended without a result");
  }
  if (j.contains("error"))
    throw Error(err_of(j["error"].get<std::string>()), SourceLocation{"", 0, 0, j.value("where", "")},
                "an iteration of the serving run (chunks " + shape_text(s) + "): " + j["message"].get<std::string>());
  return j;
}

}  // namespace

const ShapeStats& shape_stats() { return g_stats; }

std::map<std::string, std::pair<int64_t, double>> first_collectives(const std::string& label) {
  auto it = g_collectives.find(label);
  return it == g_collectives.end() ? std::map<std::string, std::pair<int64_t, double>>{} : it->second;
}

LayoutProbe probe_layout(const ShapeFrame& f, const Shape& s) {
  const nlohmann::json j = answer(finish(start(f, s, 0, true)), s);
  LayoutProbe p;
  p.kv_shape = j["kv_shape"].get<std::vector<int64_t>>();
  for (const auto& c : j["kv_held"]) {
    std::vector<std::pair<int64_t, int64_t>> r;
    if (!c.is_null())
      for (const auto& d : c) r.push_back({d[0].get<int64_t>(), d[1].get<int64_t>()});
    p.kv_held.push_back(r);
  }
  for (const auto& [name, w] : j["weights"].items()) {
    std::vector<std::pair<std::string, double>>& mine = p.weights[name];
    for (const auto& c : w) mine.push_back({c[0].get<std::string>(), c[1].get<double>()});
  }
  p.peak_bytes_per_chip = j["peak_bytes_per_chip"];
  return p;
}

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
  o.push_back("workload.kv_sequences=" + std::to_string(std::max(n + s.pad_sequences, f.resident)));
  if (s.pad_sequences > 0) o.push_back("workload.pad_sequences=" + std::to_string(s.pad_sequences));
  if (s.pad_tokens > 0) o.push_back("workload.pad_tokens=" + std::to_string(s.pad_tokens));
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
    const nlohmann::json j = answer(texts[i], shapes[i]);
    IterationCost c;
    c.seconds = j["seconds"];
    c.model_flops = j["model_flops"];
    c.stream_bytes_per_chip = j["stream_bytes_per_chip"];
    c.peak_bytes_per_chip = j["peak_bytes_per_chip"];
    g_stats.activations += j["activations"].get<double>();
    auto& seen = g_collectives[f.label];
    if (seen.empty())
      for (const auto& [kind, k] : j["collectives"].items())
        seen[kind] = {k["count"].get<int64_t>(), k["bytes_per_chip"].get<double>()};
    out.push_back(c);
  }
  g_stats.shapes += static_cast<int64_t>(shapes.size());
  g_stats.wall += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace podsim::serving
