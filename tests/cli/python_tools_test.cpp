// The project's Python scripts run under the interpreter whose packages the project installs: /usr/bin/python3,
// for which tools/packages.txt installs Debian's python3-matplotlib, whatever python3 comes first on PATH (pyenv,
// a virtualenv). Their shebang names it; the plotting scripts, started by another interpreter, run again under it,
// and say what is missing and how to get it when matplotlib is not there either.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <filesystem>
#include <fstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;
namespace fs = std::filesystem;

namespace {

struct Shell {
  int code = -1;
  std::string out, err;
};

Shell shell(const std::string& cmd) {
  const std::string out = test_dir() + "/.sh_out", err = test_dir() + "/.sh_err";
  int status = std::system(("cd '" + test_dir() + "' && " + cmd + " > '" + out + "' 2> '" + err + "'").c_str());
  Shell r;
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = read_file(out);
  r.err = read_file(err);
  return r;
}

bool is_png(const std::string& path) { return read_file(path).rfind("\x89PNG\r\n\x1a\n", 0) == 0; }

// A python3 that is not /usr/bin/python3 and cannot import matplotlib: a virtual environment without the system's
// packages, as a pyenv or virtualenv python3 first on PATH is.
std::string python_without_matplotlib() {
  const std::string venv = test_dir() + "/venv";
  EXPECT_EQ(shell("/usr/bin/python3 -m venv --without-pip '" + venv + "'").code, 0);
  const std::string python = venv + "/bin/python3";
  EXPECT_NE(shell("'" + python + "' -c 'import matplotlib'").code, 0) << "the virtual environment sees matplotlib";
  return python;
}

std::string tool(const std::string& name) { return source_dir() + "/tools/" + name; }

}  // namespace

TEST(PythonToolsTest, EveryPythonScriptNamesTheSystemInterpreter) {
  int scripts = 0;
  for (const auto& e : fs::directory_iterator(source_dir() + "/tools")) {
    if (!e.is_regular_file()) continue;
    std::ifstream f(e.path());
    std::string first;
    std::getline(f, first);
    if (first.rfind("#!", 0) != 0 || first.find("python") == std::string::npos) continue;
    ++scripts;
    EXPECT_EQ(first, "#!/usr/bin/python3") << e.path();
  }
  EXPECT_GE(scripts, 6) << "plot_report.py, plot_sweep.py, validate, gpipe_table, gshard_table, bench";
}

TEST(PythonToolsTest, PlotScriptsRunUnderAnotherPython3) {
  ASSERT_EQ(run_podsim({"run", source_dir() + "/configs/examples/matmul.yaml", "--out", "run", "-q"}).code, 0);
  const std::string python = python_without_matplotlib();
  auto r = shell("'" + python + "' '" + tool("plot_report.py") + "' run");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_EQ(r.out, "run/timeline.png\nrun/memory.png\nnote: no heatmap.png: one chip, no chips to compare\n");
  for (const char* png : {"timeline.png", "memory.png"}) EXPECT_TRUE(is_png(test_dir() + "/run/" + png)) << png;

  write_file("points.json", R"({"out": "sweep.png", "title": "t", "x_label": "x", "y_label": "y", "by_label": "b",
    "categorical": false, "logx": false, "logy": false, "series": [{"label": "1", "x": [1, 2], "y": [3, 4]}]})");
  auto s = shell("'" + python + "' '" + tool("plot_sweep.py") + "' points.json");
  ASSERT_EQ(s.code, 0) << s.err;
  EXPECT_EQ(s.out, "sweep.png\n");
  EXPECT_TRUE(is_png(test_dir() + "/sweep.png"));
}

TEST(PythonToolsTest, WithoutMatplotlibAPlotScriptSaysWhatIsMissing) {
  // -S: the system interpreter without its site packages, so without matplotlib; there is nowhere to go further.
  for (const char* script : {"plot_report.py", "plot_sweep.py"}) {
    auto r = shell("/usr/bin/python3 -S '" + tool(script) + "' nothing");
    EXPECT_EQ(r.code, 1) << script;
    EXPECT_EQ(r.err, std::string(script) + ": No module named 'matplotlib' for /usr/bin/python3. `tools/bootstrap " +
                         "build` installs it (Debian's python3-matplotlib, for /usr/bin/python3).\n")
        << script;
  }
}
