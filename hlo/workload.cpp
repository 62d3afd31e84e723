// workload.model: hlo — a per-device XLA HLO module (what every device runs after XLA's SPMD partitioner) as the
// step, and strategy.name: hlo, which places it: the module is already partitioned, so its program is the plan's
// one program and its collectives' groups give the mesh (hlo/import.h, docs/hlo.md).
//
// The logical step of an imported module is one device's program (its ops count once per device for MFU:
// Plan::logical_copies) plus, for each entry parameter the module shards, the global array it is a tile of: numeric
// mode draws those from run.seed and every device takes its tile, so replicated parameters are equal everywhere.
#include <algorithm>
#include <filesystem>
#include <memory>
#include <numeric>
#include <mutex>
#include <sstream>

#include "base/error.h"
#include "base/text.h"
#include "hlo/import.h"
#include "hlo/parser.h"
#include "hlo/stablehlo_parser.h"
#include "strategies/i_strategy.h"
#include "workloads/i_workload.h"

namespace podsim {
namespace {

namespace fs = std::filesystem;

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t b = 0;
  for (size_t e; (e = s.find(sep, b)) != std::string::npos; b = e + 1) out.push_back(s.substr(b, e - b));
  out.push_back(s.substr(b));
  return out;
}

// The module file: relative paths from the experiment file's folder first, then from the working directory.
std::string module_path(const ParamSet& p) {
  const std::string path = p.s("workload.module");
  const std::string file = p.where("workload.module").file;
  std::error_code ec;
  if (fs::path(path).is_relative() && !file.empty()) {
    fs::path near = fs::path(file).parent_path() / path;
    if (fs::is_regular_file(near, ec)) return near.string();
  }
  if (!fs::is_regular_file(path, ec))
    throw Error(Err::FileUnreadable, p.where("workload.module"),
                "workload.module names '" + path + "', which is no readable file" +
                    (file.empty() ? "" : " (looked beside " + file + " and in the working directory)"),
                "workload.module");
  return path;
}

// `NAME=VALUE` entries of a text list; an entry without '=' is an error at the key.
std::vector<std::pair<std::string, std::string>> entries(const ParamSet& p, const std::string& key,
                                                         const std::string& example) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const std::string& e : p.strings(key)) {
    size_t eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
      throw Error(Err::WrongType, p.where(key), key + " entry '" + e + "' is not NAME=VALUE (e.g. " + example + ")", key);
    out.push_back({e.substr(0, eq), e.substr(eq + 1)});
  }
  return out;
}

int64_t whole(const ParamSet& p, const std::string& key, const std::string& entry, const std::string& v, int64_t lo,
              int64_t hi) {
  try {
    size_t used = 0;
    long long n = std::stoll(v, &used);
    if (used == v.size() && n >= lo && n <= hi) return n;
  } catch (const std::exception&) {
  }
  throw Error(Err::OutOfRange, p.where(key),
              key + " entry '" + entry + "' needs a whole number from " + std::to_string(lo) + " to " + std::to_string(hi),
              key);
}

int64_t devices_per_chip(const ParamSet& p) {
  const int64_t n = p.i("workload.devices_per_chip");
  if (n > 0) return n;
  // XLA runs one device per TensorCore on TPU v2 and v3, one per chip (megacore) from v4 on.
  const std::string preset = p.has("hardware.preset") ? p.s("hardware.preset") : "";
  return preset == "tpu-v2" || preset == "tpu-v3" ? 2 : 1;
}

hlo::ImportOptions import_options(const ParamSet& p) {
  hlo::ImportOptions o;
  for (const auto& [name, v] : entries(p, "workload.trip_counts", "while.1=126"))
    o.trip_counts[name] = whole(p, "workload.trip_counts", name + "=" + v, v, 0, 10000000);
  for (const auto& [name, v] : entries(p, "workload.branches", "conditional.3=1"))
    o.branches[name] = whole(p, "workload.branches", name + "=" + v, v, 0, 1000000);
  for (const auto& [name, v] : entries(p, "workload.custom_calls", "my_kernel=flops:2e12,bytes:4e9,unit:mxu")) {
    hlo::CustomCallCost c;
    bool flops = false, bytes = false;
    for (const std::string& part : split(v, ',')) {
      const std::string f = trim(part);
      size_t colon = f.find(':');
      const std::string k = f.substr(0, colon), val = colon == std::string::npos ? "" : trim(f.substr(colon + 1));
      try {
        size_t used = 0;
        if (k == "unit" && (val == "mxu" || val == "vpu")) {
          c.mxu = val == "mxu";
          continue;
        }
        double x = std::stod(val, &used);
        if (used == val.size() && x >= 0 && x < 1e21 && (k == "flops" || k == "bytes")) {
          (k == "flops" ? c.flops : c.bytes) = x;
          (k == "flops" ? flops : bytes) = true;
          continue;
        }
      } catch (const std::exception&) {
      }
      throw Error(Err::WrongType, p.where("workload.custom_calls"),
                  "workload.custom_calls entry '" + name + "=" + v + "': '" + f +
                      "' is not flops:F, bytes:B or unit:mxu|vpu (e.g. my_kernel=flops:2e12,bytes:4e9,unit:mxu)",
                  "workload.custom_calls");
    }
    if (!flops || !bytes)
      throw Error(Err::MissingKey, p.where("workload.custom_calls"),
                  "workload.custom_calls entry '" + name + "=" + v + "' needs both flops:F and bytes:B",
                  "workload.custom_calls");
    o.custom_calls[name] = c;
  }
  o.numeric = p.has("run.numeric") && p.b("run.numeric");
  o.devices_per_chip = devices_per_chip(p);
  o.module_index = p.i("workload.module_index");
  return o;
}

std::string options_key(const std::string& path, const hlo::ImportOptions& o) {
  std::ostringstream k;
  std::error_code ec;
  k << path << '|' << fs::file_size(path, ec) << '|'
    << fs::last_write_time(path, ec).time_since_epoch().count() << '|' << o.numeric << '|' << o.devices_per_chip
    << '|' << o.module_index;
  for (const auto& [n, v] : o.trip_counts) k << "|t" << n << '=' << v;
  for (const auto& [n, v] : o.branches) k << "|b" << n << '=' << v;
  for (const auto& [n, v] : o.custom_calls) k << "|c" << n << '=' << v.flops << ',' << v.bytes << ',' << v.mxu;
  return k.str();
}

// The imported module: loaded once per process and set of options (validate, build and place all ask for it), until
// release_imported().
std::mutex g_imported_mutex;
std::string g_imported_key;
std::shared_ptr<const hlo::Imported> g_imported;

std::shared_ptr<const hlo::Imported> imported(const ParamSet& p) {
  std::string& key = g_imported_key;
  std::shared_ptr<const hlo::Imported>& last = g_imported;
  const std::string path = module_path(p);
  const hlo::ImportOptions o = import_options(p);
  const std::string k = options_key(path, o);
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  if (last && key == k) return last;
  // A file of several modules (`// -----` lines between them): the one workload.module_index picks, its lines
  // numbered as in the file.
  const std::string text = hlo::read_module_text(path);
  std::vector<std::pair<size_t, size_t>> pieces;  // [begin, end) of each module's text
  size_t begin = 0;
  auto close = [&](size_t end) {
    if (text.substr(begin, end - begin).find('{') != std::string::npos) pieces.push_back({begin, end});
  };
  for (size_t at = 0; at < text.size();) {
    size_t eol = text.find('\n', at);
    if (eol == std::string::npos) eol = text.size();
    if (trim(text.substr(at, eol - at)) == "// -----" || trim(text.substr(at, eol - at)) == "// -----\r") {
      close(at);
      begin = eol;
    }
    at = eol + 1;
  }
  close(text.size());
  const int64_t index = p.i("workload.module_index");
  if (pieces.empty()) pieces.push_back({0, text.size()});
  if (index >= static_cast<int64_t>(pieces.size()))
    throw Error(Err::OutOfRange, p.where("workload.module_index"),
                "workload.module_index is " + std::to_string(index) + " but '" + path + "' holds " +
                    std::to_string(pieces.size()) + (pieces.size() == 1 ? " module" : " modules") +
                    "; pick one from 0 to " + std::to_string(pieces.size() - 1),
                "workload.module_index");
  const auto [b, e] = pieces[static_cast<size_t>(index)];
  const std::string lines(static_cast<size_t>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(b), '\n')), '\n');
  hlo::Module m = hlo::parse_any(lines + text.substr(b, e - b), path);
  hlo::Imported im = hlo::import_module(m, o);
  if (pieces.size() > 1)
    im.notes.push_back("'" + path + "' holds " + std::to_string(pieces.size()) + " modules; podsim runs module " +
                       std::to_string(index) + (m.name.empty() ? "" : " (" + m.name + ")") +
                       "; workload.module_index picks another");
  last = std::make_shared<const hlo::Imported>(std::move(im));
  key = k;
  return last;
}

// Forgets the module imported for these parameters (a large module's graph is a tenth of a run's memory; the run's
// own graph and plan hold copies of it).
void release_imported(const ParamSet& p) {
  const std::string k = options_key(module_path(p), import_options(p));
  std::lock_guard<std::mutex> lock(g_imported_mutex);
  if (g_imported_key != k) return;
  g_imported.reset();
  g_imported_key.clear();
}

// The chips the module's devices need (every slice's), and a pod shape that would do.
void check_devices(const ParamSet& p, const hlo::Imported& im) {
  const int64_t per_chip = devices_per_chip(p);
  const int64_t slices = p.i("hardware.slices");
  int64_t chips = 1;
  for (int64_t d : p.ints("hardware.pod.dims")) chips *= d;
  if (im.devices == chips * slices * per_chip) return;
  std::string what = per_chip > 1 ? std::to_string(chips * slices) + " chips of " + std::to_string(per_chip) +
                                        " devices (one per TensorCore on " + p.s("hardware.preset") + ")"
                                  : std::to_string(chips * slices) + " chips";
  if (slices > 1) what += " (" + std::to_string(slices) + " slices of " + std::to_string(chips) + ")";
  const int64_t want = im.devices / per_chip;
  std::string need;
  if (im.devices % per_chip != 0) need = "a device count divisible by " + std::to_string(per_chip);
  else if (slices == 1) need = std::to_string(want) + " chips";
  else if (want % slices != 0) need = std::to_string(want) + " chips with hardware.slices: 1";
  else {
    need = std::to_string(want / slices) + " chips (one slice's)";
    if (want % chips == 0 && want / chips > 1) need += ", or hardware.slices to " + std::to_string(want / chips);
  }
  throw Error(Err::HloDevices, p.where("hardware.pod.dims"),
              "the module runs on " + std::to_string(im.devices) + " devices (from its " +
                  (im.mesh_sizes.size() > 1 ? "collectives' groups and header" : "header and collectives") +
                  ") but the pod has " + what + "; set hardware.pod.dims to " + need,
              "hardware.pod.dims");
}

class HloWorkload : public IWorkload {
 public:
  std::vector<ParamSpec> params() const override {
    return {
        ParamSpec::text("workload.module",
                        "The per-device HLO module to run: XLA's text (--xla_dump_to), or gzip'd text; or StableHLO/MHLO "
                        "MLIR text as JAX lowers it (.mlir, or text starting with module/func.func). A relative path "
                        "is looked up beside the experiment file, then in the working directory (docs/hlo.md)."),
        ParamSpec::text_list("workload.trip_counts",
                             "Iterations of while loops whose count the module does not say, as NAME=N "
                             "(e.g. [while.1=126]); also overrides known_trip_count.")
            .def("[]"),
        ParamSpec::text_list("workload.branches",
                             "The branch a conditional takes, as NAME=INDEX (e.g. [conditional.3=1]); others take "
                             "the branch a constant selector picks, else branch 0.")
            .def("[]"),
        ParamSpec::text_list("workload.custom_calls",
                             "The cost of custom calls podsim does not know, as TARGET=flops:F,bytes:B[,unit:mxu|vpu] "
                             "(e.g. [my_kernel=flops:2e12,bytes:4e9,unit:mxu]).")
            .def("[]"),
        ParamSpec::choice("workload.device_order", {"xyz", "xzy", "yxz", "yzx", "zxy", "zyx"},
                          "The torus dimensions device ids run along, fastest first, the slices of hardware.slices "
                          "last: with xyz (and a pod whose sizes nest with the module's mesh) device d is chip d.")
            .def("xyz"),
        ParamSpec::integer("workload.module_index",
                           "Which module to run of a file that holds several, separated by `// -----` lines (XLA's "
                           "lit tests): 0 for the first.")
            .range(0, 100000)
            .def("0"),
        ParamSpec::integer("workload.devices_per_chip",
                           "Devices of the module per chip: 0 for the generation's (2 on TPU v2 and v3, one per "
                           "TensorCore; 1 from v4 on, megacore).")
            .range(0, 2)
            .def("0"),
    };
  }

  void validate(const ParamSet& p) const override {
    std::shared_ptr<const hlo::Imported> im = imported(p);
    check_devices(p, *im);
    if (devices_per_chip(p) > 1 && p.has("run.numeric") && p.b("run.numeric"))
      throw Error(Err::HloNumeric, p.where("run.numeric"),
                  "numeric mode runs one device per chip; with " + std::to_string(devices_per_chip(p)) +
                      " devices of the module per chip (" + p.s("hardware.preset") +
                      ") run without run.numeric, or set workload.devices_per_chip: 1 on a pod of one chip per device",
                  "run.numeric");
  }

  ModelGraph build(const ParamSet& p) const override {
    std::shared_ptr<const hlo::Imported> im = imported(p);
    ModelGraph g = im->graph;
    // The global arrays of sharded entry parameters, after the program's own tensors (one device per chip: with
    // several, numeric mode is refused and nothing is bound).
    for (const hlo::ShardedInput& in : im->inputs) {
      if (in.replicated || devices_per_chip(p) > 1) continue;
      TensorInfo t = g.tensor(in.local);
      t.shape = in.global_shape;
      g.tensor(in.local).name += "@device";
      g.add_tensor(t);
    }
    return g;
  }

  void release(const ParamSet& p) const override { release_imported(p); }

  std::string default_strategy() const override { return "hlo"; }
};

class HloStrategy : public IStrategy {
 public:
  std::optional<Plan> place(const ModelGraph& g, const Experiment& exp) const override {
    if (exp.workload != "hlo")
      throw Error(Err::StrategyMismatch, exp.params.where("strategy.name"),
                  "strategy 'hlo' places imported HLO modules (workload.model: hlo), not workload '" + exp.workload + "'",
                  "strategy.name");
    const ParamSet& p = exp.params;
    std::shared_ptr<const hlo::Imported> im = imported(p);
    check_devices(p, *im);
    const int64_t per_chip = devices_per_chip(p);
    Plan plan;
    plan.strategy = "hlo";
    plan.devices_per_chip = per_chip;
    plan.logical_copies = im->devices;
    // The mesh on the torus: device ids run along the torus dimensions in workload.device_order, fastest first,
    // and over the slices last (device id = in-slice id + chips per slice x slice, as JAX's hybrid mesh).
    const Torus torus(exp.hardware.pod.dims, exp.hardware.pod.wrap, exp.hardware.pod.slices);
    std::vector<std::string> names;
    std::vector<int64_t> sizes;
    for (size_t a = 0; a < im->mesh_sizes.size(); ++a) {
      names.push_back(im->mesh_names[a]);
      sizes.push_back(im->mesh_sizes[a]);
    }
    plan.mesh = lay_out(names, sizes, torus, p.s("workload.device_order"), per_chip, p);
    Program prog;
    prog.role = "device";
    prog.graph = im->graph;
    prog.order = im->order;
    prog.kernels = im->fusions;
    prog.source_of_op = im->origin_of_op;
    for (const auto& o : im->origins) prog.sources.push_back({o.name, o.opcode, o.category});
    // Bindings: sharded parameters to their global arrays (appended to the logical graph in build()), replicated
    // ones to themselves, the rest (and every result) per device.
    std::vector<bool> bound(prog.graph.num_tensors(), false);
    TensorId global = static_cast<TensorId>(im->graph.num_tensors());
    for (const hlo::ShardedInput& in : im->inputs) {
      if (per_chip > 1) break;
      TensorBinding b;
      b.local = in.local;
      if (in.replicated) {
        b.logical = in.local;
        b.spec = ShardSpec::replicated(prog.graph.tensor(in.local).shape.size());
      } else {
        b.logical = global++;
        b.spec = ShardSpec::replicated(in.axes.size());
        for (size_t d = 0; d < in.axes.size(); ++d)
          for (int a : in.axes[d]) b.spec.dims[d].push_back(im->mesh_names[a]);
      }
      prog.inputs.push_back(b);
      bound[in.local] = true;
    }
    if (static_cast<size_t>(global) != g.num_tensors())
      throw Error(Err::Internal, "the hlo workload's logical step does not match its module");
    ShardSpec own;
    own.per_device = true;
    for (size_t t = 0; t < prog.graph.num_tensors(); ++t)
      if (prog.graph.producer(static_cast<TensorId>(t)) < 0 && !bound[t])
        prog.inputs.push_back({static_cast<TensorId>(t), static_cast<TensorId>(t), own});
    for (TensorId t : im->results)
      if (prog.graph.producer(t) >= 0) prog.results.push_back({t, t, own});
    plan.programs.push_back(std::move(prog));
    plan.role_of_chip.assign(static_cast<size_t>(exp.hardware.pod.chips()), 0);
    plan.notes = im->notes;
    plan.notes.insert(plan.notes.begin(), "the module's " + std::to_string(im->devices) + " devices: mesh " +
                                              plan.mesh.describe() + " (device ids along " +
                                              p.s("workload.device_order") + ")");
    return plan;
  }

 private:
  // Places the axes innermost first along the torus dimensions in `order`, then over the slices: device d is
  // chip d for xyz when the sizes nest. The devices of one chip (per_chip > 1) are the innermost axis and stay off
  // the torus. An axis that reaches the slices spans them over the DCN (Mesh::layout's dcn_axes), its slice factor
  // the slowest; with several such axes Mesh::layout numbers the slices outermost axis fastest, a relabelling of
  // identical slices.
  static Mesh lay_out(const std::vector<std::string>& names, const std::vector<int64_t>& sizes, const Torus& torus,
                      const std::string& order, int64_t per_chip, const ParamSet& p) {
    std::vector<int> dims;
    for (char c : order)
      if (c - 'x' < torus.ici_ndims()) dims.push_back(c - 'x');
    if (torus.slice_dim() >= 0) dims.push_back(torus.slice_dim());
    std::vector<int64_t> left;
    for (int d = 0; d < torus.ndims(); ++d) left.push_back(torus.dims()[d]);
    std::vector<std::string> placement(names.size());
    std::vector<std::string> mesh_names, dcn_names;
    std::vector<int64_t> mesh_sizes, over_slices(names.size(), 1);
    int64_t skip = per_chip;  // the chip's own devices: the innermost digits
    for (size_t k = names.size(); k-- > 0;) {
      int64_t need = sizes[k];
      if (skip > 1) {
        if (skip % need == 0) {
          skip /= need;
          continue;
        }
        throw Error(Err::HloDevices, p.where("workload.devices_per_chip"),
                    "the module's innermost mesh axis (" + std::to_string(need) + " devices) does not split into the " +
                        std::to_string(per_chip) + " devices of a chip",
                    "workload.devices_per_chip");
      }
      std::vector<std::string> parts;
      for (int d : dims) {
        if (need == 1) break;
        int64_t g = std::gcd(need, left[d]);
        if (g <= 1) continue;
        if (d == torus.slice_dim()) over_slices[k] = g;
        else parts.push_back(std::string(1, static_cast<char>('x' + d)) + ":" + std::to_string(g));
        left[d] /= g;
        need /= g;
      }
      if (need != 1)
        throw Error(Err::HloDevices, p.where("hardware.pod.dims"),
                    "the module's mesh axis of " + std::to_string(sizes[k]) + " devices does not fit what is left of the "
                    "torus; choose hardware.pod.dims whose sizes the module's mesh (" + join_sizes(sizes) + ") divides",
                    "hardware.pod.dims");
      placement[k] = join(parts, ",");
      mesh_names.insert(mesh_names.begin(), names[k]);
      mesh_sizes.insert(mesh_sizes.begin(), sizes[k]);
      if (over_slices[k] > 1) dcn_names.insert(dcn_names.begin(), names[k]);
    }
    std::vector<std::string> kept;
    for (size_t k = 0; k < names.size(); ++k)
      if (std::find(mesh_names.begin(), mesh_names.end(), names[k]) != mesh_names.end()) kept.push_back(placement[k]);
    if (mesh_names.empty()) {  // one chip
      mesh_names = {"d"};
      mesh_sizes = {1};
      kept = {""};
    }
    Mesh m = Mesh::layout(mesh_names, mesh_sizes, torus, kept, {}, dcn_names);
    // Mesh::layout gives each DCN axis as many slices as its size and what is left allow, outermost first: what was
    // counted here, innermost first (both take the greatest common divisors of sizes that nest).
    for (size_t k = 0; k < names.size(); ++k) {
      const int a = m.axis_index(names[k]);
      if (a < 0 || over_slices[k] <= 1) continue;
      int64_t got = 1;
      for (const MeshFactor& f : m.axis(a).factors)
        if (f.dim == torus.slice_dim()) got *= f.size;
      if (got != over_slices[k])
        throw Error(Err::Internal, "mesh axis " + names[k] + " of the module takes " + std::to_string(over_slices[k]) +
                                       " slices in device order but " + std::to_string(got) + " in the mesh's layout");
    }
    return m;
  }

  static std::string join_sizes(const std::vector<int64_t>& s) {
    std::vector<std::string> t;
    for (int64_t v : s) t.push_back(std::to_string(v));
    return join(t, " x ");
  }
};

PODSIM_REGISTER_WORKLOAD(HloWorkload, "hlo", "An XLA HLO module: what each device runs (docs/hlo.md)");
PODSIM_REGISTER_STRATEGY(HloStrategy, "hlo", "Runs an imported HLO module as written (workload.model: hlo)");

}  // namespace
}  // namespace podsim
