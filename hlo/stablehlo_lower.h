// The StableHLO lowering's internals: MLIR operations (hlo/stablehlo_ir.h) onto the hlo::Module the HLO text parser
// makes, one HLO instruction per operation with the HLO opcode and attributes in HLO's text syntax, so that the HLO
// importer (hlo/import.h) reads both formats alike. stablehlo_lower.cpp holds the functions, regions, values and the
// partitioning of values outside manual regions; stablehlo_ops.cpp the operations.
//
// Partitioning. JAX's lowering is the global program: arguments carry shardings (`mhlo.sharding` strings, Shardy's
// `sdy.sharding`), and `shard_map` bodies (between SPMDFullToShardShape and SPMDShardToFullShape custom calls, or in
// an `sdy.manual_computation`) are per-device code. podsim runs the per-device program, so each value has a Layout:
// Whole (the same array on every device: replicated, or a single device), Manual (a manual region's per-device
// value, its shape as written) or Split (a tile of a global array, its shape the tile's). The ops between manual
// regions are partitioned as XLA's SPMD partitioner would for the simple cases: elementwise ops of operands split
// alike, broadcasts, transposes and reshapes that keep the split dimensions, reductions (a local reduction and an
// all-reduce over the split dimensions' devices) and dot_general (batch or free dimensions split, or the contracting
// dimensions split alike: a local dot and an all-reduce). Anything else on a split value is an error naming it.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hlo/attributes.h"
#include "hlo/stablehlo_ir.h"

namespace podsim::hlo::mlir {

struct Layout {
  enum class Kind : uint8_t { Whole, Manual, Split } kind = Kind::Whole;
  Sharding s;  // Split: tile_dims (one per dimension, then the replication when replicated_last) and devices
  bool split() const { return kind == Kind::Split; }
  bool same(const Layout& o) const;
  std::string text() const;  // as an HLO sharding attribute: {replicated}, {devices=[2,1]0,1}
  std::string key() const;
};

struct Val {
  int32_t idx = -1;  // instruction of the computation being built
  Layout lay;
  Shape global;      // the shape as the text writes it (the global array's, for a split value)
  // How a whole value was made, to remake it at a split consumer's local shape: a broadcast of `bcast_of` along
  // `bcast_dims`, or a constant of one value `splat`.
  int32_t bcast_of = -1;
  std::vector<int64_t> bcast_dims;
  std::string splat;
};

struct Build {
  Computation c;
  std::map<std::string, Val> vals;
  const Build* parent = nullptr;
  bool entry = false;
};

using Attrs = std::vector<std::pair<std::string, std::string>>;

class Lowerer {
 public:
  Lowerer(const Lines& l, const MlirModule& m) : m_l(l), m_m(m) {}
  Module run();

 private:
  const Lines& m_l;
  const MlirModule& m_m;
  Module m_out;
  std::map<std::string, const Func*> m_funcs;
  struct Lowered {
    std::string name;
    std::vector<Layout> results;
    std::vector<Shape> shapes;
  };
  std::map<std::string, Lowered> m_done;  // function and argument layouts -> its computation
  std::map<std::string, int> m_names;     // computation names taken
  int m_depth = 0;
  const Build* m_outer = nullptr;  // the build whose operations are being lowered: a region's enclosing scope

  // ---- errors and emission ----
  [[noreturn]] void fail(size_t at, Err e, const std::string& what) const { m_l.fail(at, e, what); }
  [[noreturn]] void fail(const Op& op, Err e, const std::string& what) const {
    m_l.fail(op.at, e, "'" + op.name + "': " + what);
  }
  std::string computation_name(const std::string& hint);
  int32_t emit(Build& b, const std::string& opcode, const Shape& shape, const std::vector<int32_t>& operands,
               size_t at, const std::string& hint, const Attrs& attrs = {}, const std::string& literal = "");
  std::string finish(Build& b, const std::vector<Val>& results, size_t at, bool tuple_root);

  // ---- structure ----
  Lowered function(const Func& f, const std::vector<Layout>& args, size_t call_at, bool entry = false);
  std::vector<Val> body(Build& b, const std::vector<Op>& ops);
  // A region as a computation of its own: its arguments as parameters (one tuple parameter for a while's), its
  // results as the root (a tuple when `tuple_root` or several).
  // Constants the region reads from outside are copied into it (XLA's sinking of constants into regions); the
  // `passthrough` names are returned after its results (a while body's threaded captures).
  std::string region(const Region& r, const std::string& hint, size_t at, bool tuple_param, bool tuple_root,
                     const std::vector<std::string>* arg_names = nullptr, const std::vector<Shape>* arg_types = nullptr,
                     const std::vector<std::string>* passthrough = nullptr);
  Val get(const Build& b, const std::string& name, size_t at) const;
  void bind(Build& b, const Op& op, const std::vector<Val>& results);
  std::vector<Val> operands(const Build& b, const Op& op) const;
  // The results of an instruction of tuple shape `shape`, each through a get-tuple-element.
  std::vector<Val> untuple(Build& b, int32_t idx, const Shape& shape, size_t at, const std::string& hint);

  // ---- captures and conditionals (stablehlo_control.cpp) ----
  // The values a region reads that neither it (its arguments `args`, its operations, nested regions) defines, in
  // the order of first use.
  std::vector<std::string> captures(const Region& r, const std::vector<std::string>& args) const;
  // A value of an enclosing scope, from `from` outwards, and the build that holds it; null when none defines it.
  const Val* outer(const Build* from, const std::string& name, const Build** where) const;
  // The captures that must be passed in (those that are no constant: constants are sunk into the region).
  std::vector<std::string> threaded(const Build& b, const Region& r, const std::vector<std::string>& args) const;
  void sink_constants(Build& inner, const Region& r, const std::vector<std::string>& args, size_t at);
  std::vector<Val> conditional(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> chlo(Build& b, const Op& op, std::vector<Val>& vals);  // stablehlo_chlo.cpp
  std::vector<Val> quantization(Build& b, const Op& op, std::vector<Val>& vals);  // stablehlo_quant.cpp
  // ---- Shardy's round-trip custom calls and named computations (stablehlo_shardy.cpp) ----
  std::vector<Val> shardy_call(Build& b, const Op& op, const std::string& target, std::vector<Val>& vals);
  std::vector<Val> named_computation(Build& b, const Op& op, std::vector<Val>& vals);
  // A Shardy manual computation's axes (`manual_axes`) must be all of its mesh's axes of more than one device.
  void all_axes_manual(const Op& op, const std::string& sharding, const std::string& manual_axes) const;

  // ---- layouts ----
  Layout layout_of(const std::map<std::string, Attr>& attrs, size_t at) const;  // mhlo.sharding / sdy.sharding
  Layout mhlo_layout(const std::string& text, size_t at) const;
  Layout sdy_layout(const std::string& text, size_t at) const;
  Shape local(const Shape& global, const Layout& l) const;
  // A layout whose dimension j is `from[j]` of `l` (-1: a new dimension, whole), the dimensions in `fold` joined
  // into the replication.
  Layout remap(const Layout& l, const std::vector<int64_t>& from, const std::vector<int64_t>& fold) const;
  // Devices that differ only along `dims` of `l`'s tiles, each group in tile order.
  Groups groups_over(const Layout& l, const std::vector<int64_t>& dims) const;
  std::string groups_text(const Groups& g) const;
  // `v` at `lay`'s local shape when `v` is whole and can be remade there (a broadcast, a single-valued constant).
  int32_t localize(Build& b, const Val& v, const Layout& lay, const Op& op);
  // The common layout of an elementwise op's operands; whole operands of a split op remade at its local shape.
  Layout elementwise(Build& b, const Op& op, std::vector<Val>& vals);
  void need_whole(const Op& op, const std::vector<Val>& vals) const;
  Layout plain_layout_of(const std::vector<Val>& vals) const;  // Manual when an operand is, else Whole

  // ---- operations (stablehlo_ops.cpp) ----
  std::vector<Val> op(Build& b, const Op& op);
  std::vector<Val> simple(Build& b, const Op& op, const std::string& opcode, std::vector<Val>& vals);
  std::vector<Val> constant(Build& b, const Op& op);
  std::vector<Val> reduce(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> dot_general(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> convolution(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> custom_call(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> collective(Build& b, const Op& op, const std::string& kind, std::vector<Val>& vals);
  std::vector<Val> while_loop(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> manual_computation(Build& b, const Op& op, std::vector<Val>& vals);
  std::vector<Val> call(Build& b, const Op& op, std::vector<Val>& vals);
  std::string reducer(const Op& op, const Shape& scalar, size_t region_index);
  std::string window(const Op& op, size_t rank, const std::vector<int64_t>& size) const;
  const Attr* attr(const Op& op, const char* a, const char* b = nullptr) const;
  std::vector<int64_t> ints(const Op& op, const char* a, const char* b = nullptr) const;
};

std::string int_set(const std::vector<int64_t>& v);  // {1,2}
std::string joined(const std::vector<int64_t>& v, const char* sep);  // 1x2

}  // namespace podsim::hlo::mlir
