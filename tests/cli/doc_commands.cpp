#include "tests/cli/doc_commands.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tests/cli/cli_util.h"
#include "tests/cli/shipped.h"
#include "tests/test_paths.h"

namespace podsim::test {
namespace fs = std::filesystem;

namespace {

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// The command without a trailing shell comment: a '#' after a blank, outside quotes.
std::string without_comment(const std::string& s) {
  char q = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (q) {
      if (s[i] == q) q = 0;
    } else if (s[i] == '"' || s[i] == '\'') {
      q = s[i];
    } else if (s[i] == '#' && i > 0 && (s[i - 1] == ' ' || s[i - 1] == '\t')) {
      return trim(s.substr(0, i));
    }
  }
  return trim(s);
}

bool is_podsim_command(const std::string& t) {
  return t.rfind("podsim ", 0) == 0 || t.rfind("build/bin/podsim ", 0) == 0;
}

// The experiment file of a `podsim run` command: its first argument ending in .yaml.
std::string experiment_of(const std::string& command, const std::string& subcommand) {
  std::istringstream in(command);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  if (words.size() < 3 || words[1] != subcommand) return {};
  for (size_t i = 2; i < words.size(); ++i)
    if (words[i].size() > 5 && words[i].compare(words[i].size() - 5, 5, ".yaml") == 0) return words[i];
  return {};
}

std::string run_experiment(const std::string& command) { return experiment_of(command, "run"); }

// The overrides that shrink a command for the quick tier: a `podsim run` of a file reduced_sizes() names, or a
// `podsim search` of a file search_reduced_sizes() names; null for neither.
const std::vector<std::string>* quick_overrides(const std::string& command) {
  auto r = reduced_sizes().find(run_experiment(command));
  if (r != reduced_sizes().end()) return &r->second;
  auto s = search_reduced_sizes().find(experiment_of(command, "search"));
  if (s != search_reduced_sizes().end()) return &s->second;
  return nullptr;
}

std::string tail(const std::string& text, size_t lines) {
  size_t at = text.size();
  for (size_t n = 0; n <= lines && at != std::string::npos && at > 0; ++n) at = text.rfind('\n', at - 1);
  return at == std::string::npos ? text : text.substr(at + 1);
}

}  // namespace

std::vector<DocFile> doc_files() {
  std::vector<std::string> paths = {"README.md"};
  std::vector<std::string> docs;
  for (const auto& e : fs::directory_iterator(source_dir() + "/docs"))
    if (e.is_regular_file() && e.path().extension() == ".md") docs.push_back("docs/" + e.path().filename().string());
  std::sort(docs.begin(), docs.end());
  paths.insert(paths.end(), docs.begin(), docs.end());
  std::vector<DocFile> out;
  for (const std::string& p : paths) {
    if (doc_commands(p).empty()) continue;
    std::string name = p;
    for (char& c : name)
      if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
    out.push_back({p, name});
  }
  return out;
}

std::vector<DocCommand> doc_commands(const std::string& doc) {
  std::ifstream f(source_dir() + "/" + doc);
  std::vector<std::string> lines;
  for (std::string l; std::getline(f, l);) lines.push_back(l);
  std::vector<DocCommand> out;
  bool fenced = false;
  bool after_blank = true;  // an indented code block starts after a blank line
  bool indented = false;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const std::string t = trim(l);
    if (t.rfind("```", 0) == 0 && l.find_first_not_of(' ') <= 3) {
      fenced = !fenced;
      continue;
    }
    const bool four = l.rfind("    ", 0) == 0 || l.rfind("\t", 0) == 0;
    indented = !fenced && four && !t.empty() && (indented || after_blank);
    after_blank = t.empty();
    if (!(fenced || indented) || !is_podsim_command(t)) continue;
    DocCommand c{doc, static_cast<int>(i + 1), without_comment(t)};
    while (!c.text.empty() && c.text.back() == '\\' && i + 1 < lines.size())
      c.text = trim(c.text.substr(0, c.text.size() - 1)) + " " + without_comment(trim(lines[++i]));
    out.push_back(c);
  }
  return out;
}

std::vector<DocFile> doc_files_with_reduced_commands() {
  std::vector<DocFile> out;
  for (const DocFile& d : doc_files()) {
    auto commands = doc_commands(d.path);
    if (std::any_of(commands.begin(), commands.end(),
                    [](const DocCommand& c) { return quick_overrides(c.text) != nullptr; }))
      out.push_back(d);
  }
  return out;
}

const std::vector<DocException>& doc_exceptions() {
  static const std::string kSlurm =
      "the Slurm backend needs a Slurm cluster; tests/cli/sweep_slurm_test.cpp runs it on a one-node cluster it "
      "starts (as root)";
  static const std::vector<DocException> table = {
      {"README.md", "--backend slurm", kSlurm},
      {"docs/sweeps.md", "--backend slurm", kSlurm},
      {"docs/search.md", "EXP.yaml", "a template: EXP.yaml stands for any experiment with a search section"},
      // The contract's three steps, written for any experiment; README.md runs them on
      // configs/examples/data_parallel.yaml.
      {"docs/strategies.md", "exp.yaml", "a template: exp.yaml stands for any numeric experiment"},
      {"docs/strategies.md", "results/part", "compares the runs of the template above"},
  };
  return table;
}

void run_doc_commands(const std::string& doc, bool reduced) {
  const std::vector<DocCommand> commands = doc_commands(doc);
  if (commands.empty()) return;

  const std::string work = test_dir() + "/work";
  fs::create_directories(work + "/build/bin");
  fs::create_directories(work + "/bin");
  fs::create_directory_symlink(source_dir() + "/configs", work + "/configs");
  fs::create_symlink(PODSIM_BINARY, work + "/build/bin/podsim");
  fs::create_symlink(PODSIM_BINARY, work + "/bin/podsim");

  for (const DocCommand& c : commands) {
    const auto x = std::find_if(doc_exceptions().begin(), doc_exceptions().end(), [&](const DocException& e) {
      return e.doc == doc && c.text.find(e.match) != std::string::npos;
    });
    if (x != doc_exceptions().end()) {
      std::cout << doc << ":" << c.line << ": not run (" << x->reason << "): " << c.text << "\n";
      continue;
    }
    std::string command = c.text;
    if (reduced) {
      if (const std::vector<std::string>* sets = quick_overrides(command)) {
        for (const std::string& s : *sets) command += " --set " + quote(s);
        std::cout << doc << ":" << c.line << ": run with the quick tier's reduced size (tests/cli/shipped.h): "
                  << command << "\n";
      }
    }
    const std::string out = work + "/.out", err = work + "/.err";
    const std::string shell = "cd " + quote(work) + " && PATH=" + quote(work + "/bin") + ":\"$PATH\" bash -c " +
                              quote(command) + " > " + quote(out) + " 2> " + quote(err);
    const int status = std::system(shell.c_str());
    const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    EXPECT_EQ(code, 0) << doc << ":" << c.line << ": `" << c.text << "` exited with " << code << ":\n"
                       << tail(read_file(err), 20);
  }
}

}  // namespace podsim::test
