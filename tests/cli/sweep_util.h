// Helpers for the sweep tests: a small sweep with one run that fails on purpose, and results.db read with
// SQLite directly (not through podsim's own reader).
#pragma once

#include <map>
#include <string>
#include <vector>

namespace podsim::test {

// 12 single-chip matmuls: workload.m in {128, 256, 512} x (preset, HBM capacity) zipped {(tpu-v3, 1000KiB),
// (tpu-v4, 16GiB)} x (k, n) zipped {(128, 128), (256, 512)}. Peak memory is 2 (mk + kn + mn) bytes (bf16), so
// exactly one run, tpu-v3 with m=512, k=256, n=512 (1 MiB), does not fit its 1000 KiB and fails with
// PODSIM-MEM-001.
extern const char* kTinySweep;
inline constexpr const char* kTinyFailing = "tpu-v3-m512-k256";

// One row of results.db's runs table: column -> value as text ("" for NULL, "<null>" to tell NULL apart).
using Row = std::map<std::string, std::string>;
std::vector<Row> db_rows(const std::string& db_path);  // ordered by run_index
inline constexpr const char* kNull = "<null>";

}  // namespace podsim::test
