// Progress on stderr: a long `podsim run` rewrites one line in place on a terminal (simulated time, events, ops,
// wall time) and clears it at the end; nothing with -q or when stderr is not a terminal, and the results are the
// same bytes either way. A sweep counts runs done of all and failures, on a terminal and off one. The terminal is a
// pseudo-terminal the test opens; PODSIM_PROGRESS_AFTER=0 makes the run's line appear at once, so no test depends
// on how fast the machine is.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tests/cli/cli_util.h"
#include "tests/cli/sweep_util.h"

using namespace podsim::test;

namespace {

const std::string kLine = "\r\033[Ksimulating: ";

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST(ProgressTest, RunDrawsOneLineInPlaceOnATerminalAndClearsIt) {
  const std::string qs = source_dir() + "/configs/quickstart.yaml";
  CliResult r = run_podsim_on_terminal({"run", qs, "--out", "tty"}, {"PODSIM_PROGRESS_AFTER=0"});
  ASSERT_EQ(r.code, 0) << r.err;
  ASSERT_GE(count(r.err, kLine), 1u) << r.err;
  // The line as drawn at the start: nothing simulated yet, every op of the step still to do.
  EXPECT_NE(r.err.find(kLine + "0 s simulated, 0 events, 0 of "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(" ops (0 %), "), std::string::npos) << r.err;
  // Rewritten in place (no newline in it) and cleared before the summary.
  EXPECT_EQ(r.err.find('\n'), std::string::npos) << r.err;
  EXPECT_EQ(r.err.substr(r.err.size() - 4), "\r\033[K") << r.err;
  EXPECT_NE(r.out.find("step time"), std::string::npos) << r.out;
  // The simulation is the same with the line as without it.
  CliResult plain = run_podsim({"run", qs, "--out", "plain", "-q"});
  ASSERT_EQ(plain.code, 0) << plain.err;
  EXPECT_EQ(read_file(test_dir() + "/tty/summary.json"), read_file(test_dir() + "/plain/summary.json"));
}

TEST(ProgressTest, NoLineWithQuietOrWithoutATerminal) {
  const std::string qs = source_dir() + "/configs/quickstart.yaml";
  CliResult quiet = run_podsim_on_terminal({"run", qs, "--out", "q", "-q"}, {"PODSIM_PROGRESS_AFTER=0"});
  ASSERT_EQ(quiet.code, 0) << quiet.err;
  EXPECT_EQ(quiet.err, "");
  EXPECT_EQ(quiet.out, "");
  setenv("PODSIM_PROGRESS_AFTER", "0", 1);
  CliResult piped = run_podsim({"run", qs, "--out", "p"});
  unsetenv("PODSIM_PROGRESS_AFTER");
  ASSERT_EQ(piped.code, 0) << piped.err;
  EXPECT_EQ(piped.err, "");
  EXPECT_NE(piped.out.find("step time"), std::string::npos) << piped.out;
}

// The 12-run sweep with one failing run (tests/cli/sweep_util.h) on a terminal: the status line rewritten in place
// with runs done of all and failures, the failure on a line of its own, the final counts. Off a terminal the same
// counts head each run's line (tests/cli/sweep_test.cpp).
TEST(ProgressTest, SweepCountsDoneOfAllAndFailuresOnATerminal) {
  CliResult r = run_podsim_on_terminal({"sweep", write_file("tiny.yaml", kTinySweep), "-j", "2"});
  EXPECT_EQ(r.code, 1) << r.err;
  EXPECT_NE(r.err.find("\r\033[Ksweep tiny: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(std::string("\r\033[KFAILED  ") + kTinyFailing + " (exit 2)"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("sweep tiny: 11/12 done, 1 failed, 0 running"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("[11/12 done"), std::string::npos) << "no plain lines on a terminal\n" << r.err;
}
