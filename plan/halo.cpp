#include "plan/halo.h"

#include <algorithm>

#include "plan/mesh.h"
#include "base/error.h"
#include "base/text.h"

namespace podsim {

std::string halo_geometry(int64_t n, int64_t height, int64_t out_height, int64_t k, int64_t s, int64_t pad_top,
                          HaloGeometry& h) {
  const auto num = [](int64_t v) { return std::to_string(v); };
  if (height < n || out_height < n)
    return "its " + num(height) + " input rows (" + num(out_height) + " output rows) are fewer than the " + num(n) +
           " devices splitting them";
  h.devices = n;
  h.height = height;
  h.out_height = out_height;
  h.rows = (height + n - 1) / n;
  h.out_rows = (out_height + n - 1) / n;
  h.step = h.out_rows * s;
  h.window = (h.out_rows - 1) * s + k;
  h.pad_top = pad_top;
  // The rows of the map device i's window reads, [max(start, 0), min(start + window, H)), past its own rows
  // [i * rows, (i + 1) * rows): the most any device with output rows of the map needs from either neighbour (the
  // map's padding, and the rows of a device whose outputs are all padding, are no neighbour's).
  for (int64_t i = 0; i < n && i * h.out_rows < out_height; ++i) {
    const int64_t start = i * h.step - pad_top;
    h.lo = std::max(h.lo, i * h.rows - std::max<int64_t>(start, 0));
    h.hi = std::max(h.hi, std::min(start + h.window, height) - (i + 1) * h.rows);
  }
  h.even = height % n == 0 && out_height % n == 0;
  h.trivial = h.even && pad_top == 0 && h.rows == h.step && k <= s;
  if (h.lo > h.rows || h.hi > h.rows)
    return "its windows reach " + num(std::max(h.lo, h.hi)) + " rows past a device's " + num(h.rows) +
           " rows (into the device after its neighbour)";
  return "";
}

namespace {

int scratch(OpSharding& r, int slots, const std::string& name, std::vector<int64_t> shape, DType dtype) {
  r.scratch.push_back({name, std::move(shape), dtype});
  return slots + static_cast<int>(r.scratch.size()) - 1;
}

std::vector<int64_t> with_rows(std::vector<int64_t> shape, int64_t rows) {
  shape[1] = rows;
  return shape;
}

OpAttrs permute(const std::vector<std::string>& axes, int64_t shift) {
  OpAttrs a;
  a.axes = axes;
  a.shift = shift;
  return a;
}

// The attributes the halo ops share: the device's index along `axes`, the window's start (i * step - pad_top), the
// map's rows (count) and the halo sizes (dim: lo, dim2: hi).
OpAttrs halo_attrs(const HaloGeometry& h, const std::vector<std::string>& axes, bool max_pad) {
  OpAttrs a;
  a.axes = axes;
  a.offset = h.step;
  a.window.pt = h.pad_top;
  a.count = h.height;
  a.dim = h.lo;
  a.dim2 = h.hi;
  a.reduce_max = max_pad;
  return a;
}

}  // namespace

int add_halo_window(OpSharding& r, const HaloGeometry& h, int x, const std::vector<int64_t>& shape, DType dtype,
                    const std::vector<std::string>& axes, const std::string& name, bool max_pad, int slots) {
  if (h.trivial) return x;
  std::vector<int> in = {x};
  if (h.lo > 0) {  // my last lo rows are the next device's top halo
    const int edge = scratch(r, slots, name + ".halo.last", with_rows(shape, h.lo), dtype);
    const int got = scratch(r, slots, name + ".halo.above", with_rows(shape, h.lo), dtype);
    OpAttrs rows;
    rows.offset = h.rows - h.lo;
    r.steps.push_back({"halo.last", OpKind::HaloRows, {x}, {edge}, rows});
    r.steps.push_back({"", OpKind::CollectivePermute, {edge}, {got}, permute(axes, 1)});
    in.push_back(got);
  }
  if (h.hi > 0) {  // my first hi rows are the previous device's bottom halo
    const int edge = scratch(r, slots, name + ".halo.first", with_rows(shape, h.hi), dtype);
    const int got = scratch(r, slots, name + ".halo.below", with_rows(shape, h.hi), dtype);
    OpAttrs rows;
    rows.offset = 0;
    r.steps.push_back({"halo.first", OpKind::HaloRows, {x}, {edge}, rows});
    r.steps.push_back({"", OpKind::CollectivePermute, {edge}, {got}, permute(axes, -1)});
    in.push_back(got);
  }
  const int win = scratch(r, slots, name + ".window", with_rows(shape, h.window), dtype);
  r.steps.push_back({"halo.window", OpKind::HaloWindow, in, {win}, halo_attrs(h, axes, max_pad)});
  return win;
}

void add_halo_fold(OpSharding& r, const HaloGeometry& h, int win, int dx, const std::vector<int64_t>& shape,
                   DType dtype, const std::vector<std::string>& axes, const std::string& name, int slots) {
  const OpAttrs at = halo_attrs(h, axes, false);
  if (h.lo == 0 && h.hi == 0) {
    r.steps.push_back({"halo.fold", OpKind::HaloFold, {win}, {dx}, at});
    return;
  }
  const int own = scratch(r, slots, name + ".halo.own", with_rows(shape, h.rows), dtype);
  std::vector<int> out = {own}, add = {own};
  int up = -1, down = -1;
  if (h.lo > 0) up = scratch(r, slots, name + ".halo.up", with_rows(shape, h.lo), dtype), out.push_back(up);
  if (h.hi > 0) down = scratch(r, slots, name + ".halo.down", with_rows(shape, h.hi), dtype), out.push_back(down);
  r.steps.push_back({"halo.fold", OpKind::HaloFold, {win}, out, at});
  // The rows above mine go back to the previous device (its last lo rows), those below to the next (its first hi).
  if (up >= 0) {
    const int got = scratch(r, slots, name + ".halo.from_below", with_rows(shape, h.lo), dtype);
    r.steps.push_back({"", OpKind::CollectivePermute, {up}, {got}, permute(axes, -1)});
    add.push_back(got);
  }
  if (down >= 0) {
    const int got = scratch(r, slots, name + ".halo.from_above", with_rows(shape, h.hi), dtype);
    r.steps.push_back({"", OpKind::CollectivePermute, {down}, {got}, permute(axes, 1)});
    add.push_back(got);
  }
  r.steps.push_back({"halo.add", OpKind::HaloAdd, add, {dx}, at});
}

ShardSpec batch_and_rows(const ShardSpec& s) {
  ShardSpec r = ShardSpec::replicated(s.rank());
  for (size_t d = 0; d < 2 && d < s.rank(); ++d) r.dims[d] = s.dims[d];
  return r;
}

HaloGeometry spatial_geometry(const OpShardingQuery& q, const std::vector<std::string>& axes, int64_t height,
                              int64_t out_height) {
  const OpAttrs::Window& w = q.op.attrs.window;
  // A collective-permute steps along one ring: the rows' axis must be one mesh axis on one torus dimension.
  const int a = axes.size() == 1 ? q.mesh.axis_index(axes[0]) : -1;
  if (a < 0 || q.mesh.axis(a).factors.size() > 1)
    throw Error(Err::SpatialSplit, "'" + q.op.name + "': its rows are split over [" + join(axes, ", ") +
                                       "]; a spatial split needs one mesh axis laid on one torus dimension "
                                       "(mesh.placement)");
  HaloGeometry h;
  const std::string why = halo_geometry(q.mesh.size(axes), height, out_height, w.kh, w.sh, w.pt, h);
  if (!why.empty())
    throw Error(Err::SpatialSplit, "cannot split '" + q.op.name + "' (height " + std::to_string(height) + ") over " +
                                       join(axes, ", ") + ": " + why +
                                       "; use fewer devices on the spatial axis or larger images");
  return h;
}

int output_slot(OpSharding& r, const HaloGeometry& h, int out, const std::vector<int64_t>& shape, DType dtype,
                const std::string& name, int slots) {
  return h.out_height % h.devices == 0 ? out : scratch(r, slots, name + ".unmasked", shape, dtype);
}

void mask_output(OpSharding& r, const HaloGeometry& h, int raw, int out, const std::vector<std::string>& axes) {
  if (raw == out) return;
  OpAttrs a;
  a.axes = axes;
  a.offset = h.out_rows;
  a.count = h.out_height;
  r.steps.push_back({"halo.mask", OpKind::HaloWindow, {raw}, {out}, a});
}

OpAttrs window_attrs(OpAttrs a) {
  a.window.pt = a.window.pb = 0;
  return a;
}

}  // namespace podsim
