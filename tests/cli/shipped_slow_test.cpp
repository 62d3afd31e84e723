// Long tier: the shipped experiments that the quick tier runs reduced (tests/cli/shipped.h) run at full size, as
// shipped (default settings, trace on).
#include "tests/cli/shipped.h"

using namespace podsim::test;

namespace {

class ShippedFullSizeTest : public ::testing::TestWithParam<Shipped> {};

std::vector<Shipped> reduced_in_quick_tier() {
  std::vector<Shipped> out;
  for (const Shipped& s : shipped_experiments())
    if (reduced_sizes().count(s.path)) out.push_back(s);
  return out;
}

}  // namespace

TEST_P(ShippedFullSizeTest, RunsAsShipped) { run_shipped(GetParam().path, {}, test_dir() + "/run", false); }

INSTANTIATE_TEST_SUITE_P(Configs, ShippedFullSizeTest, ::testing::ValuesIn(reduced_in_quick_tier()),
                         [](const ::testing::TestParamInfo<Shipped>& i) { return i.param.name; });
