// The podsim commands the documentation shows, run as written. Used by doc_commands_test.cpp (quick tier) and
// doc_commands_slow_test.cpp (long tier).
//
// Which commands: every line of a code block (fenced with ``` or indented by four spaces) in README.md and
// docs/*.md that starts with `build/bin/podsim ` or `podsim `, its trailing `# comment` removed and `\` line
// continuations joined. The files are found when the tests are listed (one test per file with commands; the build
// lists them again when a document changes).
//
// How: in document order, each with `bash -c` in a scratch folder of the document's own (so a later command finds
// what an earlier one wrote, as a reader's folder would) that holds `configs` (a link to the checkout's) and
// `build/bin/podsim` (a link to this build's binary), with `podsim` on PATH. Each must exit 0; a failure names the
// document, the line and the command, with the tail of its stderr.
//
// Not run: the commands of exceptions() below, each with its reason. In the quick tier, a `podsim run FILE`
// command of a file that the shipped-experiment tests shrink (reduced_sizes() in tests/cli/shipped.h), or a
// `podsim search FILE` command of a search they shrink (search_reduced_sizes()), runs with
// those overrides appended, and the test prints that it did; the long tier runs every command as written.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace podsim::test {

struct DocFile {
  std::string path;  // relative to the checkout: "README.md", "docs/sweeps.md"
  std::string name;  // a test name: "README_md", "docs_sweeps_md"
};
inline void PrintTo(const DocFile& d, std::ostream* os) { *os << d.path; }

struct DocCommand {
  std::string doc;   // the document, relative to the checkout
  int line = 0;      // 1-based line of the command's first line
  std::string text;  // as written, without its comment
};

struct DocException {
  std::string doc;    // relative path of the document
  std::string match;  // a command of that document containing this text is not run
  std::string reason;
};

// The documents with at least one command: README.md, then docs/*.md sorted.
std::vector<DocFile> doc_files();
// Those with a command the quick tier runs reduced (the long tier runs them at full size).
std::vector<DocFile> doc_files_with_reduced_commands();
// The commands of one document, in order.
std::vector<DocCommand> doc_commands(const std::string& doc);
const std::vector<DocException>& doc_exceptions();

// Runs the commands of `doc` as described above; `reduced`: the quick tier's reduced sizes.
void run_doc_commands(const std::string& doc, bool reduced);

}  // namespace podsim::test
