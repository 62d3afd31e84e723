// Typed readers of the attribute values the importer needs, from their text as the parser kept it. Each throws
// Error(HloSyntax) at the value's file:line:column, naming the attribute and what a valid value looks like.
//
//   std::vector<int64_t> d = hlo::int_list(in, "dimensions");                 // {1,0,2}
//   hlo::Groups g = hlo::replica_groups(in, file);   // {{0,1},{2,3}}, {}, [2,4]<=[8], [2,4]<=[4,2]T(1,0)
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hlo/module.h"

namespace podsim::hlo {

// Device ids of each group, in rank order. Empty: one group of every device (XLA's `replica_groups={}`).
using Groups = std::vector<std::vector<int64_t>>;

// The iota tile assignment `[dims]<=[reshape]T(perm)`: arange(prod(reshape)).reshape(reshape).transpose(perm),
// flattened, in row-major order of `dims`.
std::vector<int64_t> iota_devices(const std::vector<int64_t>& reshape, const std::vector<int64_t>& perm);

// `{1,2,3}` (or `{}`) from attribute `name` of `in`; nullopt when absent.
std::optional<std::vector<int64_t>> int_list(const Instruction& in, const char* name, const std::string& file);
// Like int_list, but the attribute must be there.
std::vector<int64_t> required_ints(const Instruction& in, const char* name, const std::string& file);
// A whole number (`index=2`, `channel_id=5`, `iota_dimension=0`); nullopt when absent.
std::optional<int64_t> integer(const Instruction& in, const char* name, const std::string& file);
int64_t required_integer(const Instruction& in, const char* name, const std::string& file);
// A word or a string's contents (`direction=LT`, `custom_call_target="foo"`, `to_apply=%add` -> "add").
std::optional<std::string> word(const Instruction& in, const char* name);
std::string required_word(const Instruction& in, const char* name, const std::string& file);

Groups replica_groups(const Instruction& in, const std::string& file);
// source_target_pairs={{0,1},{1,2}}.
std::vector<std::pair<int64_t, int64_t>> source_target_pairs(const Instruction& in, const std::string& file);

struct SliceDims {
  std::vector<int64_t> start, limit, stride;
};
SliceDims slice_dims(const Instruction& in, const std::string& file);  // slice={[0:4], [2:8:2]}

// Padding of each dimension: `low_high` or `low_high_interior`, dimensions joined by 'x' (pad's padding=0_1x2_2_1).
struct PadDims {
  std::vector<int64_t> low, high, interior;
};
PadDims pad_dims(const Instruction& in, const std::string& file);

// A convolution's or reduce-window's window={size=3x3 stride=2x2 pad=1_1x1_1 lhs_dilate=.. rhs_dilate=..}.
struct Window {
  std::vector<int64_t> size, stride, pad_low, pad_high, lhs_dilate, rhs_dilate;
};
Window window(const Instruction& in, const std::string& file, size_t rank);

// A convolution's dim_labels=b01f_01io->b01f: the position of each role in the input, filter and output.
struct ConvLabels {
  int64_t in_batch = -1, in_feature = -1, k_in = -1, k_out = -1, out_batch = -1, out_feature = -1;
  std::vector<int64_t> in_spatial, k_spatial, out_spatial;
};
ConvLabels conv_labels(const Instruction& in, const std::string& file);

// A sharding annotation: replicated, maximal (one device), manual, or tiled (each dimension split into tile_dims[d]
// pieces; `devices` lists the device of each tile in row-major order of tile_dims, the replication groups last when
// `replicated_last`).
struct Sharding {
  enum class Kind : uint8_t { Replicated, Maximal, Manual, Tiled, Tuple, Unknown } kind = Kind::Replicated;
  std::vector<int64_t> tile_dims;  // one per array dimension, then the replication dimension when replicated_last
  std::vector<int64_t> devices;
  bool replicated_last = false;
  int64_t device = -1;             // Maximal
  std::vector<Sharding> tuple;
};
std::optional<Sharding> sharding(const Instruction& in, const std::string& file);

// backend_config's known_trip_count ({"known_trip_count":{"n":"7"}}); nullopt when it has none.
std::optional<int64_t> known_trip_count(const Instruction& in);

// A number from a backend_config, JSON ("key":3 / "key":"3") or MLIR attributes (key = 3 : i64); nullopt when absent.
std::optional<double> config_number(const Instruction& in, const std::string& key);

}  // namespace podsim::hlo
