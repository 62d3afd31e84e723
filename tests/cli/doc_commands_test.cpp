// Quick tier: every podsim command of README.md's and docs/*.md's code blocks runs as written and exits 0 (the
// slow ones with the shipped-experiment tests' reduced sizes appended, saying so), except the few of
// doc_exceptions(), each with its reason. See tests/cli/doc_commands.h.
#include "tests/cli/doc_commands.h"
#include "tests/cli/cli_util.h"

#include <algorithm>
#include <set>
#include <sstream>

using namespace podsim::test;

namespace {

class DocCommandsTest : public ::testing::TestWithParam<DocFile> {};

}  // namespace

TEST_P(DocCommandsTest, RunAsWritten) { run_doc_commands(GetParam().path, /*reduced=*/true); }

INSTANTIATE_TEST_SUITE_P(Docs, DocCommandsTest, ::testing::ValuesIn(doc_files()),
                         [](const ::testing::TestParamInfo<DocFile>& i) { return i.param.name; });

// The extraction finds the commands a reader sees: README.md's first block (seven commands; the first on the line
// where README.md has it, counted here from the file), a command's comment left out, and none from prose or YAML
// blocks.
TEST(DocCommandsExtraction, FindsTheCommandsOfCodeBlocks) {
  auto readme = doc_commands("README.md");
  ASSERT_GE(readme.size(), 7u);
  {
    std::istringstream in(read_file(source_dir() + "/README.md"));
    std::string l;
    int n = 0, first = 0;
    while (!first && std::getline(in, l)) {
      ++n;
      if (l.rfind("build/bin/podsim run configs/quickstart.yaml ", 0) == 0) first = n;
    }
    EXPECT_EQ(readme[0].line, first);
  }
  EXPECT_EQ(readme[0].text, "build/bin/podsim run configs/quickstart.yaml");
  auto strategies = doc_commands("docs/strategies.md");
  ASSERT_FALSE(strategies.empty());
  EXPECT_EQ(strategies[0].text, "podsim run exp.yaml --out results/part");  // an indented block
  EXPECT_TRUE(doc_commands("docs/errors.md").empty());  // `podsim docs errors` is prose there
  // One test per document with commands, these among them.
  std::set<std::string> docs;
  for (const DocFile& d : doc_files()) docs.insert(d.path);
  for (const char* d : {"README.md", "docs/strategies.md", "docs/sweeps.md"}) EXPECT_TRUE(docs.count(d)) << d;
  EXPECT_FALSE(docs.count("docs/errors.md"));
}

// Every exception still names a command, so none outlives the command it excused.
TEST(DocCommandsExtraction, EveryExceptionMatchesACommand) {
  for (const DocException& x : doc_exceptions()) {
    auto commands = doc_commands(x.doc);
    bool used = std::any_of(commands.begin(), commands.end(),
                            [&](const DocCommand& c) { return c.text.find(x.match) != std::string::npos; });
    EXPECT_TRUE(used) << x.doc << ": the exception for '" << x.match << "' matches no command any more; remove it "
                      << "from doc_exceptions() in tests/cli/doc_commands.cpp";
  }
}
