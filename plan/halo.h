// Spatial partitioning of windowed ops (convolutions, pooling) along height (GSPMD's windowed-op partitioning, Xu et
// al. 2021): the activations [B, H, W, C] are split along H over mesh axes, each device holding ceil(H / n) rows
// and computing ceil(Ho / n) output rows. The output rows of device i read the input rows [i * Ho/n * s - pt, ... + window),
// which reach past its own rows by a few (the halo); its neighbours send them with one collective-permute each
// way, and the device assembles its window (HaloWindow: its rows, the halos, and the logical padding at the map's
// edges) on which the local op runs unpadded. Backward, the gradient of a window is folded back (HaloFold): the
// rows that belong to a neighbour are sent to it and added there (HaloAdd).
//
//   HaloGeometry h;
//   std::string why = halo_geometry(4, 56, 28, 3, 2, 1, h);  // 3x3/2 conv, pad 1, 56 rows over 4 devices
//   // h.rows 14, h.out_rows 7, h.window 15, h.lo 1 (one row from the previous device), h.hi 0
//
// Uneven splits: the last devices' shards are padded past H (and Ho) with rows that hold zeros; windows read the map's
// padding there, and an op whose output rows are padded masks them back to zero (a HaloWindow over its own rows),
// so that batch norms and the next windows see zeros. Limits: at least one row per device, and a halo at most one
// shard (the neighbours' rows suffice).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "plan/op_sharding.h"

namespace podsim {

struct HaloGeometry {
  int64_t devices = 1;
  int64_t height = 0;      // H, the input's global rows
  int64_t out_height = 0;  // Ho
  int64_t rows = 0;        // ceil(H / n): a device's input rows (the last devices' padded past H)
  int64_t out_rows = 0;    // ceil(Ho / n): a device's output rows
  int64_t window = 0;    // input rows a device's output rows read: (Ho/n - 1) * s + k
  int64_t step = 0;      // (Ho/n) * s: device i's window starts at global row i * step - pad_top
  int64_t pad_top = 0;
  int64_t lo = 0, hi = 0;  // halo rows from the previous device (above) and from the next one (below)
  bool even = false;       // H and Ho divide evenly: no padded rows
  bool trivial = false;    // each window is the device's own rows from its first: no exchange, no window op
};

// The halo geometry of a window of k rows, stride s and top padding pt over H input rows (Ho output rows) split
// over n devices; returns why the split cannot be done (empty when it can).
std::string halo_geometry(int64_t n, int64_t height, int64_t out_height, int64_t k, int64_t s, int64_t pad_top,
                          HaloGeometry& out);

// Appends to `r` the local steps that give every device its input window: the last `lo` rows of slot `x` to the
// next device and the first `hi` rows to the previous one (a collective-permute each over `axes`), and the window
// assembled (HaloWindow; positions outside the map read zero, or -infinity with `max_pad`). Scratch values are
// named after `name`. `shape` is x's local shape; `slots` is the number of slots before r's scratch (the op's
// inputs and outputs). Returns the window's slot (x itself for a trivial geometry).
int add_halo_window(OpSharding& r, const HaloGeometry& h, int x, const std::vector<int64_t>& shape, DType dtype,
                    const std::vector<std::string>& axes, const std::string& name, bool max_pad, int slots);

// When the op's output rows are padded (Ho not a multiple of n), a scratch slot for the op to write (named after
// `name`), else `out`; then mask_output() appends the step that copies it to `out` with the padded rows zeroed.
int output_slot(OpSharding& r, const HaloGeometry& h, int out, const std::vector<int64_t>& shape, DType dtype,
                const std::string& name, int slots);
void mask_output(OpSharding& r, const HaloGeometry& h, int raw, int out, const std::vector<std::string>& axes);

// Appends the local steps that turn slot `win`, the gradient of every device's window (local shape `shape` with
// window rows), into slot `dx`, the gradient of its own rows: the rows of the window that belong to a neighbour
// are sent to it (a collective-permute each way) and added there; rows outside the map are dropped.
void add_halo_fold(OpSharding& r, const HaloGeometry& h, int win, int dx, const std::vector<int64_t>& shape,
                   DType dtype, const std::vector<std::string>& axes, const std::string& name, int slots);

// The spec of an NHWC activation with its batch and rows split as in `s` (settled), width and features whole.
ShardSpec batch_and_rows(const ShardSpec& s);

// The halo geometry of windowed op `q.op` (attrs.window) whose input of `height` rows (`out_height` output rows) is
// split along its rows over `axes`; throws Error(SpatialSplit) naming the op when the split cannot be done.
HaloGeometry spatial_geometry(const OpShardingQuery& q, const std::vector<std::string>& axes, int64_t height,
                              int64_t out_height);

// The attributes of a local windowed op that reads a device's window: the same window without padding along H.
OpAttrs window_attrs(OpAttrs a);

}  // namespace podsim
