// `podsim sweep export --csv`: results.db's runs table as CSV (RFC 4180: a header line, fields with commas,
// quotes or line breaks double-quoted), one line per run in index order, NULL as an empty field.
#pragma once

#include <ostream>
#include <string>

#include "sim/sweep/results_db.h"

namespace podsim {

// A sweep folder's results.db, or `path` itself when it names a file.
std::string results_db_path(const std::string& path);

void write_csv(const ResultsTable& table, std::ostream& out);

// A cell as text: integers as they are, reals with 17 significant digits at most (shortest exact), NULL as "".
std::string cell_text(const ColumnValue& v);

}  // namespace podsim
