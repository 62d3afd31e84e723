// Disaggregated serving end to end (docs/serving.md, "Disaggregated serving"): `podsim run` with a
// serving.disaggregated section prefills on a slice of its own, moves each prompt's KV cache over the link at the
// bandwidth the hardware gives it (hand-counted here from the model's shape and the link's figures), decodes on the
// experiment's slice, and reports each transfer; a bad section fails located, exit 2, nothing written.
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_util.h"

using namespace podsim::test;

namespace {

// Two layers, 2 KV heads of 1024 / 8 = 128 dims in bf16: a token's cache is 2 x 2 x 2 x 128 x 2 = 2048 bytes.
std::string experiment(const std::string& hardware_extra, const std::string& disaggregated,
                       const std::string& requests_extra = "") {
  return "hardware: {preset: tpu-v5e, pod: {dims: [2, 2]}" + hardware_extra + "}\n"
         "workload: {preset: llm-tiny, layers: 2, d_model: 1024, heads: 8, kv_heads: 2, d_ff: 4096, vocab: 2048, "
         "max_context: 2048}\n"
         "strategy: {name: spmd}\n"
         "serving:\n"
         "  requests: {count: 6, input_tokens: [20, 300], output_tokens: [4, 20], arrival: poisson, rate: 400, "
         "seed: 3" + requests_extra + "}\n"
         "  engine: {policy: continuous, slots: 4}\n"
         "  disaggregated: " + disaggregated + "\n";
}

struct Row {
  double sent, first, finish, start, transfer;
  int64_t input, output;
};

std::vector<Row> rows(const std::string& csv) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  EXPECT_NE(line.find(",kv_transfer_start_s,kv_transfer_s"), std::string::npos) << line;
  std::vector<Row> out;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::istringstream l(line);
    for (std::string x; std::getline(l, x, ',');) f.push_back(x);
    EXPECT_EQ(f.size(), 13u) << line;
    if (f.size() != 13) continue;
    out.push_back({std::stod(f[2]), std::stod(f[3]), std::stod(f[4]), std::stod(f[11]), std::stod(f[12]),
                   std::stoll(f[5]), std::stoll(f[6])});
  }
  return out;
}

nlohmann::json run(const std::string& name, const std::string& yaml) {
  const std::string path = write_file(name + ".yaml", yaml);
  const CliResult r = run_podsim({"run", path, "--out", test_dir() + "/" + name, "-q"});
  EXPECT_EQ(r.code, 0) << r.err;
  if (r.code != 0) return {};
  return nlohmann::json::parse(read_file(test_dir() + "/" + name + "/summary.json"));
}

// Every cache takes latency + input x 2048 B / bandwidth, starts after its prompt's first token and after the one
// before it has crossed; no prefill runs on the decode slice.
void expect_transfers(const std::string& name, double bandwidth, double latency) {
  const auto j = run(name, experiment(name == "dcn" ? ", dcn: {bandwidth: 1GB/s, latency: 10us}"
                                                    : ", ici: {link_bandwidth: 2GB/s, hop_latency: 1us}",
                                      "{prefill_pod: [2, 2], link: " + name + "}"));
  ASSERT_TRUE(j.contains("serving"));
  const auto& d = j["serving"]["disaggregated"];
  EXPECT_EQ(d["kv_bytes_per_token"], 2048);
  EXPECT_DOUBLE_EQ(d["link_bandwidth_bytes_per_s"].get<double>(), bandwidth);
  EXPECT_EQ(d["prefill_chips"], 4);
  EXPECT_EQ(d["decode_chips"], 4);
  EXPECT_EQ(j["chips"], 8);  // both slices, which the per_chip figures divide by
  EXPECT_NEAR(j["serving"]["per_chip"]["output_tokens_per_s"].get<double>() * 8,
              j["serving"]["output_tokens_per_s"].get<double>(), 1e-3);
  const std::vector<Row> r = rows(read_file(test_dir() + "/" + name + "/requests.csv"));
  ASSERT_EQ(r.size(), 6u);
  EXPECT_EQ(d["kv_transfers"], 6);
  double bytes = 0, end = 0;
  std::vector<size_t> order = {0, 1, 2, 3, 4, 5};
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return r[a].start < r[b].start; });
  for (size_t i : order) {
    bytes += static_cast<double>(r[i].input) * 2048;
    EXPECT_NEAR(r[i].transfer, latency + static_cast<double>(r[i].input) * 2048 / bandwidth, 2e-9) << i;
    EXPECT_GE(r[i].start, r[i].first - 1e-9) << i;
    EXPECT_GE(r[i].start, end - 1e-9) << i;  // one at a time
    end = r[i].start + r[i].transfer;
    // Its next token comes from the decode slice, after its cache arrived.
    EXPECT_GT(r[i].finish, end) << i;
  }
  EXPECT_DOUBLE_EQ(d["kv_transfer_bytes"].get<double>(), bytes);
  const std::string iters = read_file(test_dir() + "/" + name + "/iterations.csv");
  EXPECT_NE(iters.find(",slice\n"), std::string::npos);
  std::istringstream in(iters);
  std::string line;
  int prefills = 0;
  while (std::getline(in, line)) {
    if (line.size() > 8 && line.substr(line.size() - 8) == ",prefill") ++prefills;
    if (line.size() > 7 && line.substr(line.size() - 7) == ",decode") {
      EXPECT_EQ(line.find(",prefill,"), std::string::npos) << line;  // the decode slice only decodes
    }
  }
  EXPECT_EQ(prefills, 6);  // one prompt at a time
}

TEST(ServingDisaggregated, CachesCrossTheDcnAtOneHostsBandwidth) {
  // 4 chips of v5e's 8 a host: one host a slice, its NICs at 1 GB/s.
  expect_transfers("dcn", 1e9, 10e-6);
}

TEST(ServingDisaggregated, CachesCrossTheIciFaceBetweenTheSlices) {
  // [2, 2] beside [2, 2] along the first dimension: 2 links across the face, 2 GB/s each, one hop.
  expect_transfers("ici", 4e9, 1e-6);
}

void expect_error(const std::string& name, const std::string& yaml, const std::string& key) {
  const std::string path = write_file(name + ".yaml", yaml);
  const std::string out = test_dir() + "/" + name;
  const CliResult r = run_podsim({"run", path, "--out", out});
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_NE(r.err.find("PODSIM-SRV-004"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(name + ".yaml:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find(key), std::string::npos) << r.err;
  EXPECT_FALSE(exists(out));
}

TEST(ServingDisaggregated, BadSectionIsLocated) {
  expect_error("dims", experiment("", "{prefill_pod: [2, 2, 2], link: ici}"), "torus dimensions");
  expect_error("no_dcn", experiment(", dcn: {bandwidth: 0B/s}", "{prefill_pod: [2, 2], link: dcn}"),
               "hardware.dcn.bandwidth");
  expect_error("closed", experiment("", "{prefill_pod: [2, 2]}", ", max_concurrency: 2"),
               "serving.requests.max_concurrency");
}

}  // namespace
