// `podsim report` of a serving run (sim/report/serving_report.h, tools/plot_report.py's serving figure): the
// stream's figures as tables, each equal to summary.json's serving object, and serving.png drawn from
// iterations.csv and requests.csv in place of a step's plots.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// 8 requests sent at once through static batching in 2 slots on a 2 x 2 v5e slice: batches of 2 in arrival order,
// each prefilled together, then decoded.
std::string run_stream(const std::string& name) {
  const std::string csv = write_file(name + ".csv",
                                     "arrival_s,input_tokens,output_tokens\n0,120,9\n0,40,4\n0,200,14\n0,64,6\n0,33,20\n"
                                     "0,150,3\n0,90,8\n0,20,11\n");
  const std::string yaml =
      "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}}\n"
      "workload: {preset: llm-tiny, layers: 2, d_model: 512, heads: 8, kv_heads: 2, d_ff: 2048, vocab: 2048, "
      "max_context: 512}\n"
      "strategy: {name: spmd}\n"
      "serving:\n"
      "  requests: {trace: " + csv + "}\n"
      "  engine: {policy: static, slots: 2}\n";
  const std::string out = test_dir() + "/" + name;
  const CliResult r = run_podsim({"run", write_file(name + ".yaml", yaml), "--out", out, "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  return out;
}

// The line of the report that starts with `label` (after its indentation), split into words.
std::vector<std::string> words_of(const std::string& report, const std::string& label) {
  std::istringstream in(report);
  for (std::string line; std::getline(in, line);) {
    const size_t at = line.find_first_not_of(' ');
    if (at == std::string::npos || line.compare(at, label.size(), label) != 0) continue;
    std::istringstream ws(line.substr(at + label.size()));
    std::vector<std::string> w;
    for (std::string x; ws >> x;) w.push_back(x);
    return w;
  }
  return {};
}

// "21.940 ms" (two words from i) in seconds.
double seconds(const std::vector<std::string>& w, size_t i) {
  const double v = std::stod(w.at(i));
  const std::string& u = w.at(i + 1);
  return v * (u == "s" ? 1 : u == "ms" ? 1e-3 : u == "us" ? 1e-6 : 1e-9);
}

}  // namespace

TEST(ReportServing, TablesShowTheStreamsFigures) {
  const std::string out = run_stream("tables");
  const auto j = nlohmann::json::parse(read_file(out + "/summary.json"));
  const auto& s = j["serving"];
  const CliResult r = run_podsim({"report", out, "--no-plots"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find("Serving run "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("static batching"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("requests                     8 (717 input, 75 output tokens)"), std::string::npos) << r.out;
  EXPECT_EQ(s["input_tokens"], 717);
  // Each latency's mean, median, p90 and p99 as summary.json has them (printed to 3 significant decimals).
  const char* rows[][2] = {{"time to first token", "ttft_s"}, {"time per output token", "tpot_s"},
                           {"inter-token latency", "itl_s"}, {"end to end", "e2e_s"}};
  for (const auto& row : rows) {
    const std::vector<std::string> w = words_of(r.out, row[0]);
    ASSERT_EQ(w.size(), 8u) << row[0] << "\n" << r.out;
    const char* q[] = {"mean", "p50", "p90", "p99"};
    for (size_t i = 0; i < 4; ++i) {
      const double want = s[row[1]][q[i]].get<double>();
      EXPECT_NEAR(seconds(w, 2 * i), want, 5e-4 * want + 1e-9) << row[0] << " " << q[i];
    }
  }
  // Static batching of 8 requests in 2 slots: 4 prefills of 2 prompts; each batch decodes until its longer
  // sequence is done (output 9 and 4, 14 and 6, 20 and 3, 8 and 11: 8 + 13 + 19 + 10 decode iterations).
  EXPECT_EQ(s["iterations"]["prefill"]["count"], 4);
  EXPECT_EQ(s["iterations"]["decode"]["count"], 50);
  EXPECT_EQ(words_of(r.out, "prefill").at(0), "4");
  EXPECT_EQ(words_of(r.out, "decode").at(0), "50");
  EXPECT_EQ(words_of(r.out, "mixed").size(), 0u);  // no mixed iterations: no row
  EXPECT_FALSE(exists(out + "/serving.png"));      // --no-plots
}

TEST(ReportServing, DrawsTheStreamOverItsDuration) {
  const std::string out = run_stream("plot");
  const CliResult r = run_podsim({"report", out});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_NE(r.out.find(out + "/serving.png"), std::string::npos) << r.out;
  for (const char* p : {"timeline.png", "memory.png", "heatmap.png"}) EXPECT_FALSE(exists(out + "/" + p)) << p;
  // The batch panel's line (#1f77b4, drawn over the slots' line): every iteration is on it, so it spans most of the
  // figure's width, in the top panel.
  const std::string script = write_file("measure.py", R"(import json, sys
import matplotlib.image as mpimg
import numpy as np
img = (mpimg.imread(sys.argv[1])[:, :, :3] * 255).round().astype(int)
m = np.all(np.abs(img - np.array((31, 119, 180))) <= 12, axis=2)
print(json.dumps({"width": int(img.shape[1]), "height": int(img.shape[0]), "columns": int(m.any(axis=0).sum()),
                  "top": int(np.nonzero(m.any(axis=1))[0].min()), "bottom": int(np.nonzero(m.any(axis=1))[0].max())}))
)");
  const std::string json_out = test_dir() + "/measure.json";
  ASSERT_EQ(std::system(("/usr/bin/python3 '" + script + "' '" + out + "/serving.png' > '" + json_out + "'").c_str()), 0);
  const auto m = nlohmann::json::parse(read_file(json_out));
  EXPECT_EQ(m["width"], 990);  // 9 x 7.2 inches at 110 dpi
  EXPECT_EQ(m["height"], 792);
  EXPECT_GT(m["columns"].get<int>(), 990 / 2);
  EXPECT_LT(m["bottom"].get<int>(), 792 / 3 + 20);  // in the top panel
}
