// How a logical tensor is laid out over the mesh (GSPMD's sharding spec): for each tensor dimension the mesh axes
// that split it, outermost first; the axes over which the local values are a pending sum (partial, e.g. after a
// matmul whose contracting dimension was split); or values private to each device (per_device: nothing to
// assemble, every device has its own).
//
//   ShardSpec s = ShardSpec::parse("[data, -]");      // dim 0 split over data, dim 1 whole
//   ShardSpec t = ShardSpec::parse("[(data, model)]"); // dim 0 split over data (outer) and model (inner)
//   std::vector<int64_t> local = local_shape({10, 512}, s, mesh);  // {ceil(10 / |data|), 512}
//
// A dimension of n split over p devices holds ceil(n / p) on each (the last shards padded with zeros): device i
// holds global indices [i * ceil(n / p), (i + 1) * ceil(n / p)) of it, where i is its index along the axes
// (mixed radix, the last axis fastest).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace podsim {

class Mesh;

struct ShardSpec {
  std::vector<std::vector<std::string>> dims;  // per dimension; empty = not split
  std::vector<std::string> partial;            // sorted
  bool per_device = false;

  static ShardSpec replicated(size_t rank) { return ShardSpec{std::vector<std::vector<std::string>>(rank), {}, false}; }
  // "[data, -]", "[(data, model), -]", "[-, model] partial(data)"; throws Error(BadSharding) on bad text.
  static ShardSpec parse(const std::string& text);

  size_t rank() const { return dims.size(); }
  bool is_partial() const { return !partial.empty(); }
  bool splits(size_t d) const { return d < dims.size() && !dims[d].empty(); }
  bool is_replicated() const;                 // no dimension split, not partial, not per device
  std::vector<std::string> axes() const;      // every axis splitting a dimension, in dimension order
  bool uses(const std::string& axis) const;   // splits a dimension or is partial over it
  std::string text() const;                   // the form parse() reads
  bool operator==(const ShardSpec& o) const {
    return dims == o.dims && partial == o.partial && per_device == o.per_device;
  }
  bool operator!=(const ShardSpec& o) const { return !(*this == o); }
};

inline int64_t ceil_div64(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Devices a dimension is split over, and the local (padded) shape of a tensor.
int64_t split_count(const ShardSpec& s, size_t dim, const Mesh& m);
std::vector<int64_t> local_shape(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m);
// Elements of padding the local shape adds over the global one, summed over all devices holding distinct shards.
int64_t padding_elements(const std::vector<int64_t>& global, const ShardSpec& s, const Mesh& m);

}  // namespace podsim
