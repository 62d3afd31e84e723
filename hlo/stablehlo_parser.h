// A reader of StableHLO and MHLO MLIR text, as `jax.jit(f).lower(...).as_text()` and PyTorch/XLA's
// exported_program_to_stablehlo print it, into the hlo::Module the HLO text parser makes (hlo/module.h), so that
// the HLO importer (hlo/import.h) runs either format: each operation becomes the HLO instruction of the same
// meaning, with its attributes written as HLO text writes them; functions become computations, regions computations
// of their own (a while's condition and body, a reduction's combiner). A global program with shardings
// (`mhlo.sharding`, Shardy's `sdy.sharding`) is lowered to the per-device program: manual regions (shard_map) as
// written, the ops between them partitioned (hlo/stablehlo_lower.h). docs/hlo.md ("StableHLO") lists what is read.
//
//   hlo::Module m = hlo::parse_stablehlo(text, "step.mlir");   // throws Error(HloSyntax, HloUnsupported, ...) at
//                                                              // the operation's file:line:column
//   hlo::Module m = hlo::parse_any(text, path);                // StableHLO or HLO text, from the text (or .mlir)
#pragma once

#include <string>
#include <string_view>

#include "hlo/module.h"

namespace podsim::hlo {

// MLIR text: its first declaration (after comments and `#` aliases) is `module` or `func.func`, or the path ends
// in .mlir.
bool is_stablehlo(std::string_view text, const std::string& path);
Module parse_stablehlo(std::string_view text, const std::string& file);
// parse_stablehlo when is_stablehlo, else parse_module (HLO text).
Module parse_any(std::string_view text, const std::string& file);

}  // namespace podsim::hlo
