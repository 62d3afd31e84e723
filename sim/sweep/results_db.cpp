#include "sim/sweep/results_db.h"

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "base/text.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

std::string sql_name(const std::string& name) {
  std::string q = "\"";
  for (char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

SourceLocation at(const std::string& path) {
  SourceLocation w;
  w.file = path;
  return w;
}

// The value at `pointer` in a summary, as a cell; NULL when the summary has none.
ColumnValue figure(const nlohmann::json& j, const std::string& pointer) {
  nlohmann::json::json_pointer p(pointer);
  if (!j.contains(p)) return std::monostate{};
  const auto& v = j.at(p);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number()) return v.get<double>();
  if (v.is_boolean()) return static_cast<int64_t>(v.get<bool>());
  if (v.is_string()) return v.get<std::string>();
  if (v.is_null()) return std::monostate{};
  return v.dump();
}

void bind_cell(sqlite3_stmt* st, int i, const ColumnValue& v) {
  if (const auto* n = std::get_if<int64_t>(&v)) sqlite3_bind_int64(st, i, *n);
  else if (const auto* d = std::get_if<double>(&v)) sqlite3_bind_double(st, i, *d);
  else if (const auto* s = std::get_if<std::string>(&v)) sqlite3_bind_text(st, i, s->c_str(), -1, SQLITE_TRANSIENT);
  else sqlite3_bind_null(st, i);
}

ColumnValue cell(sqlite3_stmt* st, int i) {
  switch (sqlite3_column_type(st, i)) {
    case SQLITE_INTEGER: return static_cast<int64_t>(sqlite3_column_int64(st, i));
    case SQLITE_FLOAT: return sqlite3_column_double(st, i);
    case SQLITE_NULL: return std::monostate{};
    default: return std::string(reinterpret_cast<const char*>(sqlite3_column_text(st, i)));
  }
}

}  // namespace

ResultsDb::ResultsDb(const std::string& path, const SweepPlan& plan, const SweepDir& dir)
    : m_path(path), m_plan(plan), m_dir(dir) {
  if (sqlite3_open(path.c_str(), &m_db) != SQLITE_OK) {
    std::string msg = m_db ? sqlite3_errmsg(m_db) : "out of memory";
    sqlite3_close(m_db);
    m_db = nullptr;
    throw Error(Err::OutputUnwritable, at(path), "cannot open '" + path + "': " + msg);
  }
  sqlite3_busy_timeout(m_db, 30000);  // a reader (export, plot) may hold it briefly
}

ResultsDb::~ResultsDb() { sqlite3_close(m_db); }

void ResultsDb::exec(const std::string& sql) {
  char* err = nullptr;
  if (sqlite3_exec(m_db, sql.c_str(), nullptr, nullptr, &err) != SQLITE_OK) {
    std::string msg = err ? err : "?";
    sqlite3_free(err);
    throw Error(Err::OutputUnwritable, at(m_path), "results.db: " + msg);
  }
}

std::vector<std::string> ResultsDb::columns() const {
  std::vector<std::string> c = {"run_index", "name"};
  c.insert(c.end(), m_plan.param_columns.begin(), m_plan.param_columns.end());
  c.push_back("status");
  c.push_back("wall_s");
  for (const auto& f : m_plan.figures) c.push_back(f.column);
  for (const char* m : {"exit_code", "signal", "timed_out", "error", "host", "finished", "config_sha"}) c.push_back(m);
  return c;
}

void ResultsDb::sync(const std::vector<std::optional<RunStatus>>& current) {
  const std::vector<std::string> want = columns();
  std::vector<std::string> have;
  {
    sqlite3_stmt* st = nullptr;
    sqlite3_prepare_v2(m_db, "PRAGMA table_info(runs)", -1, &st, nullptr);
    while (st && sqlite3_step(st) == SQLITE_ROW) have.push_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
    sqlite3_finalize(st);
  }
  exec("BEGIN IMMEDIATE");
  try {
    if (have != want) {
      // Another set of axes or figures: the rows are rebuilt from the run folders.
      exec("DROP TABLE IF EXISTS runs");
      std::vector<std::string> defs;
      for (const auto& c : want)
        defs.push_back(sql_name(c) + (c == "name" ? " TEXT PRIMARY KEY" : c == "run_index" ? " INTEGER NOT NULL" : ""));
      exec("CREATE TABLE runs (" + join(defs, ", ") + ")");
    }
    exec("CREATE TABLE IF NOT EXISTS columns (name TEXT PRIMARY KEY, kind TEXT, source TEXT)");
    exec("CREATE TABLE IF NOT EXISTS sweep (key TEXT PRIMARY KEY, value TEXT)");
    exec("DELETE FROM columns");
    auto put_column = [&](const std::string& name, const std::string& kind, const std::string& source) {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(m_db, "INSERT INTO columns VALUES (?, ?, ?)", -1, &st, nullptr);
      bind_cell(st, 1, name);
      bind_cell(st, 2, kind);
      bind_cell(st, 3, source);
      sqlite3_step(st);
      sqlite3_finalize(st);
    };
    for (const auto& p : m_plan.param_columns) put_column(p, "parameter", p);
    for (const auto& f : m_plan.figures) put_column(f.column, "figure", "summary.json " + f.pointer);
    {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(m_db, "INSERT OR REPLACE INTO sweep VALUES (?, ?)", -1, &st, nullptr);
      for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
               {"name", m_plan.name}, {"sweep_file", fs::absolute(m_plan.file).lexically_normal().string()},
               {"runs", std::to_string(m_plan.runs.size())}}) {
        bind_cell(st, 1, k);
        bind_cell(st, 2, v);
        sqlite3_step(st);
        sqlite3_reset(st);
      }
      sqlite3_finalize(st);
    }

    // What the table says now, to leave alone rows that already match their folders.
    std::map<std::string, std::string> row_key;  // name -> status|finished|config_sha|run_index
    {
      sqlite3_stmt* st = nullptr;
      sqlite3_prepare_v2(m_db, "SELECT name, status, finished, config_sha, run_index FROM runs", -1, &st, nullptr);
      while (sqlite3_step(st) == SQLITE_ROW) {
        std::string k;
        for (int i = 1; i < 5; ++i) {
          const unsigned char* t = sqlite3_column_text(st, i);
          k += std::string(t ? reinterpret_cast<const char*>(t) : "") + "|";
        }
        row_key[reinterpret_cast<const char*>(sqlite3_column_text(st, 0))] = k;
      }
      sqlite3_finalize(st);
    }
    std::map<std::string, bool> planned;
    for (const auto& r : m_plan.runs) planned[r.name] = true;
    for (const auto& [name, k] : row_key)
      if (!planned.count(name)) {
        sqlite3_stmt* st = nullptr;
        sqlite3_prepare_v2(m_db, "DELETE FROM runs WHERE name = ?", -1, &st, nullptr);
        bind_cell(st, 1, name);
        sqlite3_step(st);
        sqlite3_finalize(st);
      }
    for (const auto& r : m_plan.runs) {
      const auto& s = current[r.index];
      std::string status = s ? s->state : "pending";
      std::string k = status + "|" + (s ? s->finished : "") + "|" + (s ? s->config_digest : r.config_digest) + "|" +
                      std::to_string(r.index) + "|";
      auto it = row_key.find(r.name);
      if (it != row_key.end() && it->second == k) continue;
      upsert(r.index, s ? &*s : nullptr, status, s ? s->stderr_tail : "");
    }
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void ResultsDb::upsert(size_t index, const RunStatus* s, const std::string& status, const std::string& error) {
  const PlannedRun& r = m_plan.runs.at(index);
  std::vector<ColumnValue> v = {static_cast<int64_t>(r.index), r.name};
  v.insert(v.end(), r.params.begin(), r.params.end());
  v.push_back(status);
  v.push_back(s ? ColumnValue(s->wall_s) : ColumnValue());
  nlohmann::json summary;
  if (s && s->done()) {
    try {
      summary = nlohmann::json::parse(read_text_file(m_dir.run(r.name) + "/summary.json"));
    } catch (const std::exception&) {
      summary = nlohmann::json();  // no figures rather than invented ones
    }
  }
  for (const auto& f : m_plan.figures) v.push_back(summary.is_object() ? figure(summary, f.pointer) : ColumnValue());
  auto opt = [](const std::optional<int>& o) { return o ? ColumnValue(static_cast<int64_t>(*o)) : ColumnValue(); };
  v.push_back(s ? opt(s->exit_code) : ColumnValue());
  v.push_back(s ? opt(s->signal) : ColumnValue());
  v.push_back(s ? ColumnValue(static_cast<int64_t>(s->timed_out)) : ColumnValue());
  v.push_back(error.empty() ? ColumnValue() : ColumnValue(error));
  v.push_back(s ? ColumnValue(s->host) : ColumnValue());
  v.push_back(s ? ColumnValue(s->finished) : ColumnValue());
  v.push_back(s ? s->config_digest : r.config_digest);

  std::vector<std::string> cols = columns(), marks(cols.size(), "?");
  for (auto& c : cols) c = sql_name(c);
  std::string sql = "INSERT OR REPLACE INTO runs (" + join(cols, ", ") + ") VALUES (" + join(marks, ", ") + ")";
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(m_db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK)
    throw Error(Err::OutputUnwritable, at(m_path), std::string("results.db: ") + sqlite3_errmsg(m_db));
  for (size_t i = 0; i < v.size(); ++i) bind_cell(st, static_cast<int>(i + 1), v[i]);
  int rc = sqlite3_step(st);
  sqlite3_finalize(st);
  if (rc != SQLITE_DONE) throw Error(Err::OutputUnwritable, at(m_path), std::string("results.db: ") + sqlite3_errmsg(m_db));
}

void ResultsDb::record(const RunStatus& s) {
  exec("BEGIN IMMEDIATE");
  try {
    upsert(s.index, &s, s.state, s.stderr_tail);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

void ResultsDb::record_lost(size_t index, const std::string& why) {
  exec("BEGIN IMMEDIATE");
  try {
    upsert(index, nullptr, "failed", why);
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(m_db, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

ResultsTable read_results(const std::string& db_path) {
  std::error_code ec;
  if (!fs::is_regular_file(db_path, ec))
    throw Error(Err::NotASweepDir, at(db_path), "no results.db at '" + db_path + "' (give a sweep folder or its results.db)");
  // Read-write when allowed: a driver killed inside a transaction leaves a hot journal, which only a connection
  // that may write can roll back (a read-only one fails with "attempt to write a readonly database").
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    db = nullptr;
    if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
      sqlite3_close(db);
      throw Error(Err::NotASweepDir, at(db_path), "cannot open '" + db_path + "' as a results.db");
    }
  }
  sqlite3_busy_timeout(db, 30000);
  ResultsTable t;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT * FROM runs ORDER BY run_index", -1, &st, nullptr) != SQLITE_OK) {
    std::string msg = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw Error(Err::NotASweepDir, at(db_path), "'" + db_path + "' is not a sweep's results.db: " + msg);
  }
  for (int i = 0; i < sqlite3_column_count(st); ++i) t.columns.push_back(sqlite3_column_name(st, i));
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::vector<ColumnValue> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) row.push_back(cell(st, i));
    t.rows.push_back(std::move(row));
  }
  sqlite3_finalize(st);
  sqlite3_close(db);
  return t;
}

}  // namespace podsim
