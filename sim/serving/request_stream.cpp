#include "sim/serving/request_stream.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "base/error.h"

namespace podsim::serving {
namespace {

std::string ll(int64_t v) { return std::to_string(v); }

// A length key: N (all alike) or [LO, HI] (uniform).
struct Lengths {
  int64_t lo = 0, hi = 0;
};

Lengths lengths(const ParamSet& p, const std::string& key) {
  if (!p.has(key))
    throw Error(Err::ServingPolicy, p.where("serving.requests.count"),
                "a synthetic stream needs " + key + ": N tokens for every request or [LO, HI] for lengths drawn "
                "uniformly",
                key);
  const std::vector<int64_t>& v = p.ints(key);
  Lengths l{v.front(), v.back()};
  if (l.hi < l.lo)
    throw Error(Err::OutOfRange, p.where(key),
                key + " = [" + ll(l.lo) + ", " + ll(l.hi) + "] is a range whose end is below its start; give [LO, HI] "
                "with LO <= HI",
                key);
  return l;
}

// A field of a trace row, a number or an error naming the line.
double field(const std::string& text, const std::string& file, int line, const std::string& what) {
  try {
    size_t used = 0;
    const double v = std::stod(text, &used);
    for (size_t i = used; i < text.size(); ++i)
      if (!std::isspace(static_cast<unsigned char>(text[i]))) throw std::invalid_argument(text);
    if (!std::isfinite(v) || v < 0) throw std::invalid_argument(text);
    return v;
  } catch (const std::logic_error&) {
    throw Error(Err::ServingTrace, SourceLocation{file, line, 0, ""},
                "the " + what + " '" + text + "' is not a number of 0 or more; a row is arrival_s,input_tokens," +
                    "output_tokens");
  }
}

void check_context(const ParamSet& p, const Request& r, const SourceLocation& where, const std::string& key) {
  if (!p.has("workload.max_context")) return;
  const int64_t limit = p.i("workload.max_context");
  if (r.input + r.output > limit)
    throw Error(Err::ServingLength, where,
                "request " + ll(r.id) + " holds " + ll(r.input + r.output) + " tokens (" + ll(r.input) + " input, " +
                    ll(r.output) + " output), past the model's context of workload.max_context = " + ll(limit) +
                    "; give requests of at most " + ll(limit) + " tokens in all",
                key);
}

}  // namespace

bool serving_run(const ParamSet& p) {
  return p.has("serving.requests.count") || p.has("serving.requests.trace");
}

std::vector<Request> read_trace(const std::string& path) {
  std::ifstream f(path);
  if (!f)
    throw Error(Err::ServingTrace, SourceLocation{path, 0, 0, ""}, "cannot read the request trace '" + path + "'");
  std::vector<Request> out;
  std::string line;
  int n = 0;
  while (std::getline(f, line)) {
    ++n;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    if (n == 1 && line.find_first_of("0123456789") != 0) continue;  // the header
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cells.push_back(c);
    if (cells.size() != 3)
      throw Error(Err::ServingTrace, SourceLocation{path, n, 0, ""},
                  "a row has " + ll(static_cast<int64_t>(cells.size())) +
                      " fields; each is arrival_s,input_tokens,output_tokens");
    Request r;
    r.id = static_cast<int64_t>(out.size());
    r.arrival = field(cells[0], path, n, "arrival");
    const double in = field(cells[1], path, n, "input length"), o = field(cells[2], path, n, "output length");
    if (in < 1 || o < 1 || in != std::floor(in) || o != std::floor(o))
      throw Error(Err::ServingTrace, SourceLocation{path, n, 0, ""},
                  "a request has " + cells[1] + " input and " + cells[2] + " output tokens; each is a whole number "
                  "of at least 1");
    r.input = static_cast<int64_t>(in);
    r.output = static_cast<int64_t>(o);
    if (!out.empty() && r.arrival < out.back().arrival) {
      std::ostringstream m;
      m << "request " << r.id << " arrives at " << cells[0] << " s, before the one on the line above ("
        << out.back().arrival << " s); a trace lists requests in the order they arrive";
      throw Error(Err::ServingTrace, SourceLocation{path, n, 0, ""}, m.str());
    }
    out.push_back(r);
  }
  if (out.empty())
    throw Error(Err::ServingTrace, SourceLocation{path, n, 0, ""}, "the request trace has no requests");
  return out;
}

std::vector<Request> request_stream(const ParamSet& p) {
  std::vector<Request> out;
  if (p.has("serving.requests.trace")) {
    std::string path = p.s("serving.requests.trace");
    const std::string& file = p.where("serving.requests.trace").file;
    if (std::filesystem::path(path).is_relative() && !file.empty())
      path = (std::filesystem::path(file).parent_path() / path).lexically_normal().string();
    out = read_trace(path);
    // Lines of the trace for the context check (the header and blank lines skipped as read_trace skips them).
    for (const Request& r : out) check_context(p, r, SourceLocation{path, 0, 0, ""}, "serving.requests.trace");
    return out;
  }
  const int64_t n = p.i("serving.requests.count");
  const Lengths in = lengths(p, "serving.requests.input_tokens"), o = lengths(p, "serving.requests.output_tokens");
  const std::string arrival = p.s("serving.requests.arrival");
  double rate = 0;
  if (arrival != "all_at_once") {
    if (!p.has("serving.requests.rate"))
      throw Error(Err::ServingPolicy, p.where("serving.requests.arrival"),
                  "serving.requests.arrival: " + arrival + " needs serving.requests.rate, the requests per second",
                  "serving.requests.rate");
    rate = p.f("serving.requests.rate");
  }
  // One generator for the stream, drawn in a fixed order (gap, input, output per request), so that a seed gives the
  // same stream on every machine: the draws are integers mapped by hand, not through the library's distributions.
  std::mt19937_64 rng(static_cast<uint64_t>(p.i("serving.requests.seed")));
  auto unit = [&] { return static_cast<double>(rng() >> 11) * 0x1.0p-53; };  // [0, 1)
  auto draw = [&](const Lengths& l) {
    if (l.lo == l.hi) return l.lo;
    return l.lo + static_cast<int64_t>(unit() * static_cast<double>(l.hi - l.lo + 1));
  };
  double t = 0;
  for (int64_t i = 0; i < n; ++i) {
    Request r;
    r.id = i;
    if (arrival == "constant") t = static_cast<double>(i) / rate;
    else if (arrival == "poisson" && i > 0) t += -std::log1p(-unit()) / rate;
    r.arrival = t;
    r.input = draw(in);
    r.output = draw(o);
    check_context(p, r, p.where("serving.requests.input_tokens"), "serving.requests.input_tokens");
    out.push_back(r);
  }
  return out;
}

}  // namespace podsim::serving
