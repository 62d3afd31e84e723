// results.db: one row per planned run, written by the sweep driver only (never by run processes, so never
// concurrently). The run folders are the truth; the table is their index, brought up to date when a driver starts
// and after every finished run, each change in one transaction.
//
// Table `runs`: run_index, name, one column per swept key path (the run's resolved value, quantities in SI units:
// bytes, Hz, s, B/s; lists as text), status (done | failed | pending), wall_s, one column per figure (the value at
// its JSON pointer in summary.json, NULL when the summary has no such value or the run did not finish), exit_code,
// signal, timed_out, error (stderr tail), host, finished, config_sha. Table `columns` says where each column comes
// from; table `sweep` holds the sweep's name and file.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "sim/sweep/status.h"

struct sqlite3;

namespace podsim {

class ResultsDb {
 public:
  ResultsDb(const std::string& path, const SweepPlan& plan, const SweepDir& dir);
  ~ResultsDb();
  ResultsDb(const ResultsDb&) = delete;
  ResultsDb& operator=(const ResultsDb&) = delete;

  // Makes the table match the plan: its columns, no rows for runs the plan no longer has, and for each planned
  // run the row its folder calls for (`current[i]`: run i's status when its folder holds a result of this plan).
  void sync(const std::vector<std::optional<RunStatus>>& current);
  // The row of one finished run.
  void record(const RunStatus& s);
  // A run whose process ended without a status record (e.g. a Slurm task killed by its time limit).
  void record_lost(size_t index, const std::string& why);

 private:
  void exec(const std::string& sql);
  void upsert(size_t index, const RunStatus* s, const std::string& status, const std::string& error);
  std::vector<std::string> columns() const;

  sqlite3* m_db = nullptr;
  std::string m_path;
  const SweepPlan& m_plan;
  SweepDir m_dir;
};

// Column names of a results.db's runs table, and its rows (for export and plots). PODSIM-SWP-004 when `path` is no
// results.db.
struct ResultsTable {
  std::vector<std::string> columns;
  std::vector<std::vector<ColumnValue>> rows;  // ordered by run_index
};
ResultsTable read_results(const std::string& db_path);

}  // namespace podsim
