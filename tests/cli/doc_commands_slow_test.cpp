// Long tier: the documents whose slow commands the quick tier (doc_commands_test.cpp) shrinks run every command as
// written, at full size. See tests/cli/doc_commands.h.
#include "tests/cli/doc_commands.h"

using namespace podsim::test;

namespace {

class DocCommandsFullSizeTest : public ::testing::TestWithParam<DocFile> {};

}  // namespace

TEST_P(DocCommandsFullSizeTest, RunAsWritten) { run_doc_commands(GetParam().path, /*reduced=*/false); }

INSTANTIATE_TEST_SUITE_P(FullSize, DocCommandsFullSizeTest, ::testing::ValuesIn(doc_files_with_reduced_commands()),
                         [](const ::testing::TestParamInfo<DocFile>& i) { return i.param.name; });
