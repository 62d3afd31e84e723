// A sweep file: a base experiment plus axes of values over key paths (docs/sweeps.md). This is the YAML side
// only: it reads the file into plain structs, each value as YAML text with the place it was written, and checks
// the file's own shape. Expanding the axes into runs and validating each run is sim/sweep/plan.h.
//
//   SweepFile f = load_sweep_file("configs/sweeps/scaling.yaml");
//   // f.axes[0].points[i] is one point of the first axis: the key paths and values it sets
//
// Every problem is an Error at file:line:column (unknown section, an axis that is not a list, zipped lists of
// different lengths, a key given twice).
#pragma once

#include <string>
#include <vector>

#include "base/error.h"

namespace podsim {

// One key path set to one value, e.g. workload.batch = 8. A mapping value in the file is flattened into one
// SweepValue per leaf (hardware.chip.mxu: {rows: 64} sets hardware.chip.mxu.rows).
struct SweepValue {
  std::string path;           // dotted key path
  std::string text;           // the value as YAML flow text ("8", "[4, 4]", "64MiB")
  SourceLocation key_where;   // where the key was written
  SourceLocation value_where; // where the value was written
};

// The values one point of an axis sets, in the order written.
using SweepPoint = std::vector<SweepValue>;

struct SweepAxis {
  enum class Kind { Grid, Zip, Runs };
  Kind kind = Kind::Grid;
  std::vector<std::string> keys;   // the key paths the axis sets (for Runs: every key any entry sets)
  std::vector<SweepPoint> points;  // at least one
  SourceLocation where;
};

// A summary figure stored in results.db: a column name and a JSON pointer into summary.json.
struct SweepFigure {
  std::string column;
  std::string pointer;
  SourceLocation where;
};

struct SweepFile {
  std::string path;        // the sweep file as given
  std::string text;        // its contents
  std::string name;        // `name:`, or the file name without .yaml
  std::string base_path;   // the base experiment file (resolved against the sweep file's folder); "" when inline
  // An inline base: the sweep file's text with everything but the base blanked out, so that the loader's
  // file:line:column for a problem in the base are those of the sweep file.
  std::string base_text;
  SourceLocation base_where;
  SweepPoint set;                   // values every run gets
  std::vector<SweepAxis> axes;      // in the order written; the first varies slowest
  std::string run_name;             // the run-name template ("" = built from the swept values)
  SourceLocation run_name_where;
  std::vector<SweepFigure> figures; // extra figures (`figures:`), added to the default set
};

SweepFile load_sweep_file(const std::string& path);

// The figures every results.db has (docs/sweeps.md); `figures:` entries add to them or replace one by name.
const std::vector<SweepFigure>& default_sweep_figures();
// The figures a sweep whose runs include serving runs has besides (docs/sweeps.md).
const std::vector<SweepFigure>& serving_sweep_figures();

}  // namespace podsim
