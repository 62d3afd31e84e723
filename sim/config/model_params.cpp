#include "sim/config/model_params.h"

namespace podsim {

void read_model_params(Experiment& e) {
  const ParamSet& p = e.params;
  HbmConfig& h = e.hardware.chip.hbm;
  auto real = [&](const char* path, double& out) {
    if (p.has(path)) out = p.f(path);
  };
  auto integer = [&](const char* path, int64_t& out) {
    if (p.has(path)) out = p.i(path);
  };
  auto boolean = [&](const char* path, bool& out) {
    if (p.has(path)) out = p.b(path);
  };
  real("hardware.chip.hbm.faw", h.faw);
  integer("hardware.chip.hbm.banks", h.banks);
  real("hardware.chip.hbm.row_cycle", h.row_cycle);
  real("hardware.chip.hbm.rcd", h.rcd);
  real("hardware.chip.hbm.cas", h.cas);
  real("hardware.chip.hbm.read_to_write", h.read_to_write);
  real("hardware.chip.hbm.write_to_read", h.write_to_read);
  integer("hardware.chip.hbm.write_batch", h.write_batch);
  real("hardware.chip.hbm.refresh_interval", h.refresh_interval);
  real("hardware.chip.hbm.refresh_time", h.refresh_time);
  integer("hardware.chip.kernel_overhead", e.hardware.chip.kernel_overhead);
  integer("hardware.chip.load_depth", e.hardware.chip.load_depth);
  integer("hardware.chip.mxu.accumulator_rows", e.hardware.chip.mxu.accumulator_rows);
  integer("hardware.chip.mxu.weight_push", e.hardware.chip.mxu.weight_push);
  integer("hardware.chip.mxu.result_pop", e.hardware.chip.mxu.result_pop);
  integer("hardware.chip.mxu.int8_rate", e.hardware.chip.mxu.int8_rate);
  integer("hardware.chip.mxu.fp8_rate", e.hardware.chip.mxu.fp8_rate);
  boolean("hardware.chip.mxu.load_rows_held", e.hardware.chip.mxu.load_rows_held);
  if (p.has("run.fusion")) e.run.fusion = p.s("run.fusion");
  if (p.has("run.fusion_multi_output")) e.run.fusion_multi_output = p.b("run.fusion_multi_output");
  if (p.has("run.fusion_duplicate")) e.run.fusion_duplicate = p.b("run.fusion_duplicate");
  if (p.has("run.fusion_vector_conv")) e.run.fusion_vector_conv = p.b("run.fusion_vector_conv");
  if (p.has("run.conv_taps")) e.run.conv_taps = p.s("run.conv_taps");
  if (p.has("run.core_split")) e.run.core_split = p.s("run.core_split");
  if (p.has("run.conv_overlap")) e.run.conv_overlap = p.b("run.conv_overlap");
  if (p.has("run.scheduler")) e.run.scheduler = p.s("run.scheduler");
  if (p.has("run.symmetry")) e.run.symmetry = p.s("run.symmetry");
}

}  // namespace podsim
