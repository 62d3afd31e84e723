// Long tier: every podsim command of the documentation's code blocks runs as written, at full size (the quick tier,
// doc_commands_test.cpp, shrinks the slow ones). See tests/cli/doc_commands.h.
#include "tests/cli/doc_commands.h"

using namespace podsim::test;

namespace {

class DocCommandsFullSizeTest : public ::testing::TestWithParam<DocFile> {};

}  // namespace

TEST_P(DocCommandsFullSizeTest, RunAsWritten) { run_doc_commands(GetParam().path, /*reduced=*/false); }

INSTANTIATE_TEST_SUITE_P(FullSize, DocCommandsFullSizeTest, ::testing::ValuesIn(doc_files()),
                         [](const ::testing::TestParamInfo<DocFile>& i) { return i.param.name; });
