#include "sim/report/plots.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "base/error.h"
#include "sim/report/plot_script.h"

namespace podsim {
namespace fs = std::filesystem;

namespace {

std::string quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// A run of `podsim run --memory-only` has no timeline: nothing to draw.
bool simulated(const std::string& dir) {
  std::ifstream f(dir + "/summary.json");
  SourceLocation w;
  w.file = dir;
  if (!f) throw Error(Err::NotARunDir, w, "'" + dir + "' is not a podsim run folder (no summary.json)");
  try {
    return nlohmann::json::parse(f).value("simulated", true);
  } catch (const std::exception& e) {
    throw Error(Err::NotARunDir, w, "'" + dir + "/summary.json' is not valid JSON: " + e.what());
  }
}

}  // namespace

PlotOutcome write_plots(const std::string& dir, const PlotOptions& options) {
  PlotOutcome out;
  if (!simulated(dir)) return out;
  const char* python = "/usr/bin/python3";
  if (access(python, X_OK) != 0)
    throw Error(Err::FileUnreadable, "plots need /usr/bin/python3 with matplotlib (Debian: apt-get install "
                                     "python3-matplotlib); use --no-plots for the tables only");
  // The script travels inside the binary, so an installed podsim needs no source tree.
  fs::path script = fs::temp_directory_path() / ("podsim_plot_" + std::to_string(getpid()) + ".py");
  {
    std::ofstream f(script);
    f << kPlotScript;
  }
  std::string cmd = std::string(python) + " " + quote(script.string()) + (options.fit_colors ? " --fit-colors " : " ") +
                    quote(dir) + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string output;
  char buf[4096];
  while (p && fgets(buf, sizeof buf, p)) output += buf;
  int rc = p ? pclose(p) : -1;
  std::error_code ec;
  fs::remove(script, ec);
  if (rc != 0) {
    if (output.find("No module named 'matplotlib'") != std::string::npos)
      throw Error(Err::FileUnreadable, "plots need matplotlib (Debian: apt-get install python3-matplotlib); use "
                                       "--no-plots for the tables only");
    throw Error(Err::Internal, "plotting failed: " + output);
  }
  // One line per PNG written, "note: ..." for a plot left out.
  std::istringstream lines(output);
  for (std::string l; std::getline(lines, l);) {
    if (l.rfind("note: ", 0) == 0) out.notes.push_back(l.substr(6));
    else if (!l.empty()) out.files.push_back(l);
  }
  return out;
}

}  // namespace podsim
