// A parser of XLA's HLO text, as XLA prints it (HloModule::ToString, --xla_dump_to): an optional `HloModule name,
// attrs` line, then computations `[ENTRY] %name (params) -> shape { instructions }`. Each instruction reads
// `[ROOT] %name = shape opcode(operands), attr=value, ...`, possibly over several lines. Accepted as XLA prints
// them: names with or without '%', operands with or without their shapes, `/*index=N*/` and `//` comments,
// layouts with TPU tiling and memory-space suffixes, attribute values of any form (kept as text, hlo/attributes.h
// reads them). Without ENTRY the last computation is the entry, without ROOT the last instruction is the root.
//
//   hlo::Module m = hlo::parse_module(text, "step.hlo");    // throws Error(HloSyntax) with file:line:column
//   hlo::Module m = hlo::read_module("step.hlo.gz");        // text, or gzip'd text
//
// Errors (PODSIM-HLO-001, PODSIM-HLO-002) name the file, line and column, the token found and what was expected.
#pragma once

#include <string>
#include <string_view>

#include "hlo/module.h"

namespace podsim::hlo {

Module parse_module(std::string_view text, const std::string& file);
// Reads `path` (gzip'd when it starts with gzip's magic bytes) and parses it: HLO text, or StableHLO
// (hlo/stablehlo_parser.h). Throws Error(FileUnreadable) when it
// cannot be read.
Module read_module(const std::string& path);
// The file's text, inflated when it is gzip'd.
std::string read_module_text(const std::string& path);

}  // namespace podsim::hlo
