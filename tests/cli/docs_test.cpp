// The generated reference pages stay in sync with the declarations they come from: docs/config.md with the
// parameter declarations, docs/errors.md with the error catalogue, docs/validation.md with what tools/validate
// measures. Regenerate with tools/validate and
//   build/bin/podsim docs config > docs/config.md && build/bin/podsim docs errors > docs/errors.md
#include <gtest/gtest.h>

#include <cstdlib>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

TEST(DocsTest, ConfigReferenceIsCurrent) {
  auto r = run_podsim({"docs", "config"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source_dir() + "/docs/config.md"))
      << "docs/config.md is stale: regenerate it with `podsim docs config > docs/config.md`";
  for (const char* key : {"hardware.chip.mxu.weight_double_buffer", "hardware.pod.dims", "workload.m", "run.allow_oom",
                          "run.trace.detail", "workload.algorithm"})
    EXPECT_NE(r.out.find(std::string("`") + key + "`"), std::string::npos) << key;
}

TEST(DocsTest, ErrorCatalogueIsCurrent) {
  auto r = run_podsim({"docs", "errors"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(source_dir() + "/docs/errors.md"))
      << "docs/errors.md is stale: regenerate it with `podsim docs errors > docs/errors.md`";
  EXPECT_NE(r.out.find("`PODSIM-SIM-001`"), std::string::npos);
}

// docs/validation.md is what tools/validate measures now (it runs this build's podsim).
TEST(DocsTest, ValidationPageIsCurrent) {
  std::string cmd = std::string("PODSIM='") + PODSIM_BINARY + "' python3 '" + source_dir() + "/tools/validate' --check";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << "docs/validation.md is stale: regenerate it with tools/validate";
}
