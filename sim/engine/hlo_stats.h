// What an imported program's instructions cost on the result chip, as a TPU profile shows it: per HLO instruction
// (hlo_op_stats.csv, the profile's "HLO Op Stats" table) and per category of instruction (hlo_category_stats.csv and
// summary.json `hlo_categories`, the profile's breakdown by "HLO op category": convolution fusion, loop fusion,
// all-reduce, data formatting, ...), so that podsim's breakdown can be set beside a measured profile. docs/hlo.md.
//
//   const HloOpStats* st = hlo_op_stats(prepared, simulation);  // nullptr when the program was not imported
//   std::string per_op = hlo_op_stats_csv(*st), per_category = hlo_category_stats_csv(*st);
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace podsim {

struct Prepared;
struct Simulation;

struct HloOpStats {
  // What ran of an instruction, or of a category of them, on the result chip.
  struct Figures {
    int64_t occurrences = 0;  // kernels that ran it
    double time = 0;          // seconds: its share of the kernels' spans, waiting included
    double self = 0;          // seconds a unit worked for it
    double flops = 0, bytes = 0;          // its share of the kernels' FLOPs and HBM bytes
    std::map<std::string, double> bound;  // self seconds by what bound the kernel: Compute, HBM, ICI
    std::string bound_by() const;         // the bound of most seconds ("-" without any)
    void add(const Figures& f);           // adds f's figures to these
  };
  struct Row : Figures {
    std::string category, name, opcode;
  };
  struct Category : Figures {
    std::string name;
    int64_t instructions = 0;
  };
  std::string role;                  // the program's role (the profile's "Program id")
  std::vector<Row> rows;             // the instructions that ran, by self time (most first; ties in program order)
  std::vector<Category> categories;  // by self time, most first; ties by name
  double self = 0;                   // the rows' self time in all
};

// The result chip's figures per instruction and per category, worked out once per simulation; nullptr when the
// result chip's program has no sources (not an imported module).
const HloOpStats* hlo_op_stats(const Prepared& p, const Simulation& s);

std::string hlo_op_stats_csv(const HloOpStats& st);
std::string hlo_category_stats_csv(const HloOpStats& st);
// summary.json `hlo_categories`: one object per category, in the order of `categories`.
nlohmann::ordered_json hlo_categories_json(const HloOpStats& st);

}  // namespace podsim
