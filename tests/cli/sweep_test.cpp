// `podsim sweep` end to end with the local backend: a sweep of 12 tiny runs with one that fails on purpose,
// checked row by row in results.db (read with SQLite directly) against each run's own folder; resuming; export;
// plots; timeouts; and kill -9 of the driver mid-sweep, which loses no finished run and records nothing twice.
#include <gtest/gtest.h>
#include "tests/test_paths.h"
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sqlite3.h>

#include "tests/cli/cli_util.h"
#include "tests/cli/sweep_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

struct Expect {
  int m, k, n;
  std::string preset;
};

// The 12 runs of kTinySweep in plan order, written out by hand: m slowest, then the preset zip, then (k, n).
std::vector<Expect> expected_runs() {
  std::vector<Expect> v;
  for (int m : {128, 256, 512})
    for (const char* p : {"tpu-v3", "tpu-v4"})
      for (auto [k, n] : {std::pair{128, 128}, std::pair{256, 512}}) v.push_back({m, k, n, p});
  return v;
}

double num(const std::string& s) { return std::stod(s); }

nlohmann::json summary_of(const std::string& run_dir) { return nlohmann::json::parse(read_file(run_dir + "/summary.json")); }

}  // namespace

TEST(SweepTest, LocalSweepFillsResultsDbRowByRow) {
  std::string file = write_file("tiny.yaml", kTinySweep);
  CliResult r = run_podsim({"sweep", file, "-j", "2"});
  // One run fails on purpose: the sweep says so with PODSIM-SWP-007 and exit 1, after running all of them.
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("PODSIM-SWP-007: 1 of 12 runs failed"), std::string::npos) << r.err;
  // Plain progress lines when stderr is no terminal, the last with every run counted (tests/cli/progress_test.cpp
  // has the terminal's line).
  EXPECT_NE(r.err.find("[11/12 done, 1 failed] "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\r'), std::string::npos) << r.err;
  const std::string dir = test_dir() + "/results/tiny";
  std::vector<Row> rows = db_rows(dir + "/results.db");
  std::vector<Expect> want = expected_runs();
  ASSERT_EQ(rows.size(), want.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& row = rows[i];
    const Expect& w = want[i];
    std::string name = w.preset + "-m" + std::to_string(w.m) + "-k" + std::to_string(w.k);
    SCOPED_TRACE(name);
    EXPECT_EQ(row.at("run_index"), std::to_string(i));
    EXPECT_EQ(row.at("name"), name);
    EXPECT_EQ(row.at("workload.m"), std::to_string(w.m));
    EXPECT_EQ(row.at("workload.k"), std::to_string(w.k));
    EXPECT_EQ(row.at("workload.n"), std::to_string(w.n));
    EXPECT_EQ(row.at("hardware.preset"), w.preset);
    EXPECT_EQ(num(row.at("hardware.chip.hbm.capacity")), w.preset == "tpu-v3" ? 1000.0 * 1024 : 16.0 * (1ull << 30));
    const std::string run_dir = dir + "/runs/" + name;
    auto status = nlohmann::json::parse(read_file(run_dir + "/status.json"));
    EXPECT_EQ(status["name"], name);
    EXPECT_EQ(num(row.at("wall_s")), status["wall_s"].get<double>());
    EXPECT_EQ(row.at("finished"), status["finished"].get<std::string>());
    if (name == kTinyFailing) {
      // 2 (512*256 + 256*512 + 512*512) bytes = 1 MiB > 1000 KiB.
      EXPECT_EQ(row.at("status"), "failed");
      EXPECT_EQ(row.at("exit_code"), "2");
      EXPECT_EQ(row.at("signal"), kNull);
      EXPECT_EQ(row.at("timed_out"), "0");
      EXPECT_NE(row.at("error").find("PODSIM-MEM-001"), std::string::npos) << row.at("error");
      EXPECT_NE(read_file(run_dir + "/stderr.txt").find("PODSIM-MEM-001"), std::string::npos);
      for (const char* f : {"step_time_s", "mfu", "mxu_busy", "hbm_busy", "ici_busy", "peak_memory_bytes", "chips"})
        EXPECT_EQ(row.at(f), kNull) << f;
      EXPECT_FALSE(exists(run_dir + "/summary.json"));
      continue;
    }
    EXPECT_EQ(row.at("status"), "done");
    EXPECT_EQ(row.at("exit_code"), "0");
    EXPECT_EQ(row.at("error"), kNull);
    // Figures are the run's own summary.json values.
    nlohmann::json s = summary_of(run_dir);
    EXPECT_EQ(num(row.at("step_time_s")), s["step_time_s"].get<double>());
    EXPECT_EQ(num(row.at("mfu")), s["mfu"].get<double>());
    EXPECT_EQ(num(row.at("hfu")), s["hfu"].get<double>());
    // A matmul has no batch: no throughput, NULL rather than zero.
    EXPECT_EQ(row.at("samples_per_s"), kNull);
    EXPECT_EQ(row.at("tokens_per_s"), kNull);
    EXPECT_EQ(num(row.at("mxu_busy")), s["busy_fraction"]["mxu"].get<double>());
    EXPECT_EQ(num(row.at("hbm_busy")), s["busy_fraction"]["hbm"].get<double>());
    EXPECT_EQ(num(row.at("ici_busy")), 0.0);  // one chip: no links
    EXPECT_EQ(num(row.at("peak_memory_bytes")), 2.0 * (w.m * w.k + w.k * w.n + w.m * w.n));  // bf16, counted by hand
    EXPECT_EQ(row.at("chips"), "1");
    // A run without a pipeline has no bubble: NULL, never a made-up number. One chip communicates nothing.
    EXPECT_EQ(row.at("bubble_fraction"), kNull);
    EXPECT_EQ(num(row.at("exposed_comm_fraction")), 0.0);
    EXPECT_EQ(num(row.at("exposed_comm_fraction")), s["communication"]["exposed_fraction"].get<double>());
    EXPECT_EQ(s["experiment"], name);
  }
  // No leftovers of run processes.
  EXPECT_TRUE(fs::is_empty(dir + "/tmp"));

  // The same run outside the sweep gives the same summary (the configuration is self-contained).
  CliResult alone = run_podsim({"run", dir + "/configs/tpu-v4-m256-k256.yaml", "--out", "alone", "-q"});
  ASSERT_EQ(alone.code, 0) << alone.err;
  EXPECT_EQ(read_file(test_dir() + "/alone/summary.json"), read_file(dir + "/runs/tpu-v4-m256-k256/summary.json"));

  // Resume: only the failed run runs again; the others' folders are untouched.
  std::string before = read_file(dir + "/runs/tpu-v3-m128-k128/status.json");
  CliResult again = run_podsim({"sweep", file});
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.err.find("12 runs, 11 done before, 1 to run"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(dir + "/runs/tpu-v3-m128-k128/status.json"), before);
  EXPECT_EQ(db_rows(dir + "/results.db").size(), 12u);

  // CSV: a header and one line per run.
  CliResult csv = run_podsim({"sweep", "export", dir, "--csv"});
  ASSERT_EQ(csv.code, 0) << csv.err;
  EXPECT_EQ(csv.out.rfind("run_index,name,workload.m,hardware.preset,hardware.chip.hbm.capacity,workload.k,workload.n,"
                          "status,wall_s,step_time_s,mfu,",
                          0),
            0u)
      << csv.out;
  EXPECT_EQ(std::count(csv.out.begin(), csv.out.end(), '\n'), 13);

  // A plot: MFU against m, one line per preset, for one (k, n).
  CliResult plot = run_podsim({"sweep", "plot", dir, "--x", "m", "--y", "mfu", "--by", "hardware.preset", "--where",
                               "workload.k=128", "-o", "mfu.png"});
  ASSERT_EQ(plot.code, 0) << plot.err;
  EXPECT_EQ(read_file(test_dir() + "/mfu.png").substr(0, 8), "\x89PNG\r\n\x1a\n");
  // Without the filter two runs sit at each (m, preset): refused, naming what still varies.
  CliResult amb = run_podsim({"sweep", "plot", dir, "--x", "m", "--y", "mfu", "--by", "hardware.preset"});
  EXPECT_EQ(amb.code, 2);
  EXPECT_NE(amb.err.find("they differ in workload.k (128, 256), workload.n (128, 512)"), std::string::npos) << amb.err;
}

TEST(SweepTest, ChangedRunsRunAgainAndDroppedOnesLeaveTheTable) {
  std::string base = "base:\n  hardware: {preset: tpu-v3}\n  workload: {model: matmul, m: 64, k: 64, n: 64, dtype: bf16}\n";
  std::string file = write_file("s.yaml", base + "set: {run.trace.format: \"off\"}\ngrid: {workload.m: [64, 128, 192]}\n");
  ASSERT_EQ(run_podsim({"sweep", file, "--out", "sw"}).code, 0);
  std::string kept = read_file(test_dir() + "/sw/runs/64/status.json");
  // Another k for every run, and 192 dropped: all planned runs are stale, the dropped one leaves results.db.
  write_file("s.yaml", base + "set: {run.trace.format: \"off\", workload.k: 128}\ngrid: {workload.m: [64, 128]}\n");
  CliResult r = run_podsim({"sweep", file, "--out", "sw"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("2 runs, 0 done before, 2 to run"), std::string::npos) << r.err;
  EXPECT_NE(read_file(test_dir() + "/sw/runs/64/status.json"), kept);
  std::vector<Row> rows = db_rows(test_dir() + "/sw/results.db");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[1]["name"], "128");
  EXPECT_EQ(num(rows[1]["peak_memory_bytes"]), 2.0 * (128 * 128 + 128 * 64 + 128 * 64));  // bf16: m k, k n, m n
}

TEST(SweepTest, TimeoutStopsARunAndTheSweepGoesOn) {
  // The second run waits on a FIFO nobody ever writes (tests/plugins/hold_workload.cpp): only the timeout ends it.
  // The first is one 64 x 64 matmul, done in a small fraction of the 5 s.
  Hold never("never");
  std::string file = write_file(
      "t.yaml",
      "base:\n  hardware: {preset: tpu-v3}\n  workload: {model: test_hold}\n"
      "set: {run.trace.format: \"off\"}\n"
      "runs:\n  - {}\n  - {workload.hold: '" + never.path() + "'}\n"
      "run_name: \"r{index}\"\n");
  CliResult r = run_podsim({"sweep", file, "--timeout", "5s", "--plugin", PODSIM_TEST_PLUGIN});
  EXPECT_EQ(r.code, 1) << r.err;
  std::vector<Row> rows = db_rows(test_dir() + "/results/t/results.db");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0]["status"], "done");
  EXPECT_EQ(rows[1]["status"], "failed");
  EXPECT_EQ(rows[1]["timed_out"], "1");
  EXPECT_NE(rows[1]["error"].find("--timeout of 5 s"), std::string::npos) << rows[1]["error"];
  EXPECT_GE(num(rows[1]["wall_s"]), 5.0);
  // podsim run removes its partial folder on SIGTERM: nothing is left in tmp/ but the failed run's record.
  EXPECT_TRUE(fs::is_empty(test_dir() + "/results/t/tmp"));
}

namespace {

// Ten runs, one at a time; run i waits for the test while test_dir()/hold-i exists as a FIFO (tests/cli/cli_util.h:
// Hold), so the test kills the driver while a run it chose is in flight, however fast runs are.
std::string held_sweep() {
  std::string holds;
  for (int i = 0; i < 10; ++i) holds += std::string(i ? ", " : "") + "'" + test_dir() + "/hold-" + std::to_string(i) + "'";
  return write_file("held.yaml", "name: held\n"
                                 "base: {hardware: {preset: tpu-v3}, workload: {model: test_hold}}\n"
                                 "set: {run.trace.format: \"off\"}\n"
                                 "grid: {workload.hold: [" + holds + "]}\n"
                                 "run_name: \"r{index}\"\n");
}

pid_t start_driver(const std::string& file) {
  const std::string dir = test_dir();
  pid_t pid = fork();
  if (pid == 0) {
    if (chdir(dir.c_str()) != 0) _exit(99);
    freopen("/dev/null", "w", stderr);
    execl(PODSIM_BINARY, "podsim", "sweep", file.c_str(), "-j", "1", "--plugin", PODSIM_TEST_PLUGIN,
          static_cast<char*>(nullptr));
    _exit(98);
  }
  return pid;
}

size_t finished_runs(const std::string& runs) {
  size_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(runs, ec)) n += e.path().filename().string()[0] != '.';
  return n;
}

}  // namespace

TEST(SweepTest, KillingTheDriverLosesNothingAndDuplicatesNothing) {
  std::string file = held_sweep();
  const std::string dir = test_dir() + "/results/held";
  std::map<std::string, std::string> seen;  // run -> status.json when first seen
  for (size_t kill_at : {2u, 5u}) {
    // Runs before `kill_at` finish; run `kill_at` holds until the driver is killed and it is stopped in turn.
    Hold hold("hold-" + std::to_string(kill_at));
    pid_t pid = start_driver(file);
    ASSERT_TRUE(hold.wait_held(pid)) << "the driver ended before run " << kill_at << " started";
    EXPECT_EQ(finished_runs(dir + "/runs"), kill_at);
    kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status));
    // The run in flight gets SIGTERM when the driver dies and removes its partial folder before it exits.
    hold.wait_gone();
    for (const auto& e : fs::directory_iterator(dir + "/tmp"))
      EXPECT_EQ(e.path().filename().string()[0], '.') << "a partial folder of the killed driver's run stayed";
    // Every folder in runs/ is a whole, done run; none was replaced by the later driver.
    for (const auto& e : fs::directory_iterator(dir + "/runs")) {
      std::string name = e.path().filename().string();
      std::string st = read_file(e.path().string() + "/status.json");
      ASSERT_FALSE(st.empty()) << name << " has no status";
      EXPECT_EQ(nlohmann::json::parse(st)["state"], "done") << name;
      EXPECT_TRUE(exists(e.path().string() + "/summary.json")) << name;
      if (seen.count(name)) {
        EXPECT_EQ(seen[name], st) << name << " ran twice";
      }
      seen.emplace(name, st);
    }
    EXPECT_EQ(seen.size(), kill_at);
    // results.db never calls a run done that has no folder.
    for (const Row& row : db_rows(dir + "/results.db"))
      if (row.at("status") == "done") {
        EXPECT_TRUE(seen.count(row.at("name"))) << row.at("name");
      }
  }
  CliResult r = run_podsim({"sweep", file, "--plugin", PODSIM_TEST_PLUGIN});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.err.find("5 done before"), std::string::npos) << r.err;
  std::vector<Row> rows = db_rows(dir + "/results.db");
  ASSERT_EQ(rows.size(), 10u);
  std::set<std::string> names;
  for (size_t i = 0; i < rows.size(); ++i) {
    EXPECT_EQ(rows[i]["run_index"], std::to_string(i));
    EXPECT_EQ(rows[i]["status"], "done");
    names.insert(rows[i]["name"]);
    auto it = seen.find(rows[i]["name"]);
    if (it != seen.end()) {
      EXPECT_EQ(read_file(dir + "/runs/" + rows[i]["name"] + "/status.json"), it->second) << "re-ran " << it->first;
    }
  }
  EXPECT_EQ(names.size(), 10u);
  EXPECT_EQ(finished_runs(dir + "/runs"), 10u);
}

TEST(SweepTest, PlanPrintsEveryRunAndExitsZero) {
  std::string file = write_file("tiny.yaml", kTinySweep);
  CliResult r = run_podsim({"sweep", "plan", file});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), 13);
  EXPECT_NE(r.out.find("9\ttpu-v3-m512-k256\tworkload.m=512\thardware.preset=tpu-v3\thardware.chip.hbm.capacity=1024KB"
                       "\tworkload.k=256\tworkload.n=512\n"),
            std::string::npos)
      << r.out;
  EXPECT_FALSE(exists(test_dir() + "/results"));  // plan writes nothing
  for (const char* shipped : {"scaling.yaml", "batch.yaml"}) {
    CliResult s = run_podsim({"sweep", "plan", source_dir() + "/configs/sweeps/" + shipped});
    EXPECT_EQ(s.code, 0) << shipped << ": " << s.err;
  }
}

// A driver killed inside a transaction leaves results.db with a hot rollback journal. Export (and the next driver)
// must roll it back and read the table as it was before, never fail with "attempt to write a readonly database".
TEST(SweepTest, ExportReadsADatabaseLeftInsideATransaction) {
  std::string file = write_file("tiny.yaml", kTinySweep);
  CliResult r = run_podsim({"sweep", file, "-j", "2"});
  ASSERT_EQ(r.code, 1) << r.err;  // one run of kTinySweep fails on purpose
  const std::string dir = test_dir() + "/results/tiny", crashed = test_dir() + "/crashed";
  fs::create_directories(crashed);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(std::string(dir + "/results.db").c_str(), &db), SQLITE_OK);
  // A small page cache makes the transaction spill into the database file before it commits, as a long one does:
  // then the journal is hot and must be played back.
  ASSERT_EQ(sqlite3_exec(db,
                         "PRAGMA cache_size = 2; BEGIN IMMEDIATE; UPDATE runs SET status = 'half-written';"
                         "CREATE TABLE filler(x); INSERT INTO filler VALUES (zeroblob(1000000));",
                         nullptr, nullptr, nullptr),
            SQLITE_OK);
  // The files as a process killed now would leave them: the database and its journal, and no lock.
  ASSERT_TRUE(fs::exists(dir + "/results.db-journal"));
  fs::copy_file(dir + "/results.db", crashed + "/results.db");
  fs::copy_file(dir + "/results.db-journal", crashed + "/results.db-journal");
  sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  r = run_podsim({"sweep", "export", crashed + "/results.db", "--csv"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out.find("half-written"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(",done,"), std::string::npos) << r.out;
  // Rolled back: the journal is gone or empty.
  EXPECT_TRUE(!fs::exists(crashed + "/results.db-journal") || fs::file_size(crashed + "/results.db-journal") == 0);
}
