// The device mesh behind a per-device module, recovered from its collectives' replica groups and its sharding
// annotations (GSPMD's device assignment read backwards). Device ids are mixed-radix numbers whose digits are the
// mesh axes: axis i of size n_i, the last axis fastest, so device id = sum of index_i * (product of later sizes).
// Every group structure a module uses must be a set of these axes: its groups are the devices that differ only
// along them, each group in rank order (the last of its axes fastest). `[2,128]<=[256]` spans the inner axis of
// a 2 x 128 mesh, `[128,2]<=[2,128]T(1,0)` the outer one.
//
//   DeviceMesh dm(256);
//   dm.add(groups_a); dm.add(groups_b);      // each: groups of device ids in rank order
//   dm.build();                              // the coarsest axes every structure is made of
//   std::vector<int> axes = dm.axes_of(groups_a);   // mesh axes of the structure, in its rank order
//
// A structure that is not a set of mesh axes (uneven groups, a rank order no mixed radix gives, groups that leave
// devices out, digits of two structures that do not nest) is refused with the reason.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace podsim::hlo {

class DeviceMesh {
 public:
  explicit DeviceMesh(int64_t devices = 1) : m_devices(devices) {}

  int64_t devices() const { return m_devices; }
  // Adds the groups of one collective or one dimension of a tile assignment (empty: one group of every device).
  // Returns "" or why they are not a set of mesh axes.
  std::string add(const std::vector<std::vector<int64_t>>& groups);
  // A cut the mesh must have (devices of a chip: the digit of stride 1 and size `n`).
  void cut(int64_t stride) { m_cuts[stride] = true; }
  // Lays the axes out from every structure added; "" or why the structures' digits do not nest.
  std::string build();

  // After build(): axis sizes, outermost first (product = devices()).
  const std::vector<int64_t>& sizes() const { return m_sizes; }
  // The stride of axis `a` in device ids.
  int64_t stride(int a) const { return m_strides.at(static_cast<size_t>(a)); }
  // The mesh axes (indices into sizes(), outermost first) a structure that was added spans, in its rank order:
  // the last is its fastest-varying digit. Empty for groups of one device.
  std::vector<int> axes_of(const std::vector<std::vector<int64_t>>& groups) const;
  // Device `d`'s index along axis `a`.
  int64_t coordinate(int64_t d, int a) const { return (d / stride(a)) % m_sizes.at(static_cast<size_t>(a)); }

 private:
  struct Digit {
    int64_t stride, size;
  };
  std::string pattern(const std::vector<std::vector<int64_t>>& groups, std::vector<Digit>& digits) const;

  int64_t m_devices;
  std::map<int64_t, bool> m_cuts;  // strides (and the device count) where an axis ends
  std::vector<int64_t> m_sizes, m_strides;
};

}  // namespace podsim::hlo
