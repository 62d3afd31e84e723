#include "tests/cli/sweep_util.h"

#include <gtest/gtest.h>
#include <sqlite3.h>

#include <cstdio>

namespace podsim::test {

const char* kTinySweep = R"(name: tiny
base:
  hardware: {preset: tpu-v3}
  workload: {model: matmul, m: 128, k: 128, n: 128, dtype: bf16}
set:
  run.trace.format: "off"
grid:
  workload.m: [128, 256, 512]
zip:
  - {hardware.preset: [tpu-v3, tpu-v4], hardware.chip.hbm.capacity: [1000KiB, 16GiB]}
  - {workload.k: [128, 256], workload.n: [128, 512]}
run_name: "{hardware.preset}-m{workload.m}-k{workload.k}"
)";

std::vector<Row> db_rows(const std::string& db_path) {
  std::vector<Row> rows;
  sqlite3* db = nullptr;
  // Read-write: a killed driver may have left a hot journal, which a read-only connection cannot roll back.
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "cannot open " << db_path;
    sqlite3_close(db);
    return rows;
  }
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT * FROM runs ORDER BY run_index", -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "no runs table in " << db_path << ": " << sqlite3_errmsg(db);
    sqlite3_close(db);
    return rows;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    Row r;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      std::string v;
      switch (sqlite3_column_type(st, i)) {
        case SQLITE_NULL: v = kNull; break;
        case SQLITE_FLOAT: {  // all digits: sqlite3_column_text rounds to 15
          char buf[64];
          std::snprintf(buf, sizeof buf, "%.17g", sqlite3_column_double(st, i));
          v = buf;
          break;
        }
        default: v = reinterpret_cast<const char*>(t);
      }
      r[sqlite3_column_name(st, i)] = v;
    }
    rows.push_back(r);
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return rows;
}

}  // namespace podsim::test
