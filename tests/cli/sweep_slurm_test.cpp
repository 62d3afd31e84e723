// The Slurm backend against a real one-node Slurm cluster (munge, slurmctld, slurmd on localhost) that this test
// starts with tests/cli/local_slurm.sh from Debian's packages and stops again. The sweep of tests/cli/sweep_util.h
// runs through job arrays (split at --array-limit 5: three arrays) and must give the rows the local backend gives;
// running it again resubmits only the failed run. When the packages cannot be installed or the cluster does not
// start, the test fails: it never passes without having used Slurm.
#include <gtest/gtest.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <fcntl.h>
#include <nlohmann/json.hpp>

#include "tests/cli/cli_util.h"
#include "tests/cli/sweep_util.h"

using namespace podsim::test;

namespace {

std::string script() { return source_dir() + "/tests/cli/local_slurm.sh"; }

// Runs the cluster script; returns its exit code, its output in `log`.
int cluster(const std::string& what, std::string& log) {
  std::string out = test_dir() + "/slurm-" + what + ".log";
  std::string cmd = "SLURM_NODE_CPUS=8 bash '" + script() + "' " + what + " > '" + out + "' 2>&1";
  int rc = std::system(cmd.c_str());
  log = read_file(out);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

class SweepSlurmTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One cluster per machine: tests of other checkouts wait for this one (the lock goes with the process).
    m_lock = open("/tmp/podsim-local-slurm.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    ASSERT_GE(m_lock, 0) << "cannot create /tmp/podsim-local-slurm.lock";
    while (flock(m_lock, LOCK_EX) != 0) ASSERT_EQ(errno, EINTR) << "cannot lock /tmp/podsim-local-slurm.lock";
    std::string log;
    int rc = cluster("start", log);
    m_started = true;
    ASSERT_EQ(rc, 0) << "the local Slurm cluster did not start (this test needs root, Debian's slurmctld, slurmd, "
                        "slurm-client and munge packages, and no foreign /etc/slurm/slurm.conf):\n"
                     << log;
  }
  void TearDown() override {
    if (m_started) {
      std::string log;
      EXPECT_EQ(cluster("stop", log), 0) << log;
    }
    if (m_lock >= 0) close(m_lock);
  }

 private:
  int m_lock = -1;
  bool m_started = false;
};

// A row without the columns that describe where and when a run ran; error messages name the sweep folder.
Row comparable(Row r, const std::string& folder) {
  for (const char* c : {"wall_s", "host", "finished"}) r.erase(c);
  std::string& e = r["error"];
  for (size_t p; (p = e.find(folder)) != std::string::npos;) e.replace(p, folder.size(), "<sweep>");
  return r;
}

}  // namespace

TEST_F(SweepSlurmTest, SameRowsAsTheLocalBackend) {
  std::string file = write_file("tiny.yaml", kTinySweep);
  CliResult local = run_podsim({"sweep", file, "--out", "local", "-j", "2"});
  ASSERT_EQ(local.code, 1) << local.err;  // the one run that fails on purpose

  CliResult slurm = run_podsim({"sweep", file, "--backend", "slurm", "--out", "slurm", "--poll", "0.2",
                                "--array-limit", "5", "--time-limit", "5", "--sbatch-arg=--cpus-per-task=1"});
  EXPECT_EQ(slurm.code, 1) << slurm.err;
  EXPECT_NE(slurm.err.find("PODSIM-SWP-007: 1 of 12 runs failed"), std::string::npos) << slurm.err;
  // Twelve runs in arrays of at most five: manifest indices 0-4, 5-9 and 10-11, each array from 0 with its offset.
  EXPECT_NE(slurm.err.find("5 task(s), array 0-4, offset 0"), std::string::npos) << slurm.err;
  EXPECT_NE(slurm.err.find("5 task(s), array 0-4, offset 5"), std::string::npos) << slurm.err;
  EXPECT_NE(slurm.err.find("2 task(s), array 0-1, offset 10"), std::string::npos) << slurm.err;

  const std::string ldir = test_dir() + "/local", sdir = test_dir() + "/slurm";
  std::vector<Row> lrows = db_rows(ldir + "/results.db"), srows = db_rows(sdir + "/results.db");
  ASSERT_EQ(lrows.size(), 12u);
  ASSERT_EQ(srows.size(), 12u);
  for (size_t i = 0; i < lrows.size(); ++i) {
    SCOPED_TRACE(lrows[i]["name"]);
    EXPECT_EQ(comparable(srows[i], sdir), comparable(lrows[i], ldir));
    // Each run ran in an array task and says which.
    auto st = nlohmann::json::parse(read_file(sdir + "/runs/" + srows[i]["name"] + "/status.json"));
    EXPECT_FALSE(st["slurm_job"].get<std::string>().empty());
    EXPECT_EQ(st["slurm_task"].get<std::string>(), std::to_string(i % 5));
    if (srows[i]["status"] == "done") {
      EXPECT_EQ(read_file(sdir + "/runs/" + srows[i]["name"] + "/summary.json"),
                read_file(ldir + "/runs/" + srows[i]["name"] + "/summary.json"));
    }
  }
  EXPECT_EQ(srows[9]["name"], kTinyFailing);
  EXPECT_EQ(srows[9]["status"], "failed");

  // Again: only the failed run (manifest index 9 = task 4 of the array at offset 5) is submitted.
  std::string kept = read_file(sdir + "/runs/tpu-v4-m512-k256/status.json");
  CliResult again = run_podsim({"sweep", file, "--backend", "slurm", "--out", "slurm", "--poll", "0.2",
                                "--array-limit", "5"});
  EXPECT_EQ(again.code, 1) << again.err;
  EXPECT_NE(again.err.find("12 runs, 11 done before, 1 to run"), std::string::npos) << again.err;
  EXPECT_NE(again.err.find("1 task(s), array 4, offset 5"), std::string::npos) << again.err;
  EXPECT_EQ(read_file(sdir + "/runs/tpu-v4-m512-k256/status.json"), kept);
  EXPECT_EQ(db_rows(sdir + "/results.db").size(), 12u);
}
