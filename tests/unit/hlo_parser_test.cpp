// The HLO text parser (hlo/parser.h) on XLA's own modules (tests/data/hlo/, from XLA's test data and benchmark corpus)
// and on hand-written ones. The structural counts are those facts.py counts with a plain text scan (LICENSE-NOTICE.md
// beside the files), so the parser and an independent reading agree; errors name file:line:column and the token.
#include <gtest/gtest.h>
#include "tests/test_paths.h"

#include <map>
#include <regex>
#include <string>

#include "base/error.h"
#include "hlo/parser.h"

using namespace podsim;
using namespace podsim::hlo;

namespace {

std::string data(const std::string& f) {
  std::string path = PODSIM_SOURCE_DIR;
  path += "/tests/data/hlo/";
  path += f;
  return path;
}

std::map<std::string, int> opcodes(const Module& m) {
  std::map<std::string, int> n;
  for (const Computation& c : m.computations)
    for (const Instruction& in : c.instructions) ++n[in.opcode];
  return n;
}

// The error's "file:line:col" and message.
std::string parse_error(const std::string& text) {
  try {
    parse_module(text, "t.hlo");
  } catch (const Error& e) {
    return e.where().str() + " " + std::string(e.id()) + " " + e.message();
  }
  return "no error";
}

struct Facts {
  std::string file, module, entry;
  size_t computations, instructions;
  int dots, all_gather, all_reduce, all_to_all, custom_calls;
};

}  // namespace

TEST(HloParserTest, ReadsXlasModulesWithTheCountsOfAPlainTextScan) {
  // facts.py (a text scan, not a parser) counted these.
  const std::vector<Facts> files = {
      {"hlo_llama31_405b_bf16_64x8.hlo.gz", "jit_train_step", "main.2269_spmd", 161, 2029, 32, 16, 50, 0, 3},
      {"hlo_llama31_70b_bf16_32x8.hlo.gz", "jit_train_step", "main.2269_spmd", 177, 2110, 32, 16, 59, 0, 3},
      {"hlo_llama31_8b_bf16_1x8.hlo.gz", "jit_train_step", "main.41792_spmd", 3684, 33943, 677, 450, 1197, 0, 64},
      {"hlo_mixtral_8x7b_bf16_1x8.hlo.gz", "jit_train_step", "main.50649_spmd", 4866, 45240, 1221, 450, 1261, 192, 160},
      {"nv_maxtext_1n1g_jit_train_step_before_optimization.hlo.gz", "jit_train_step", "main.2034", 87, 1947, 32, 0, 0,
       0, 39},
      {"small/gpu_hlo_collective_cse.hlo", "m", "e", 1, 6, 0, 3, 0, 0, 0},
      // facts.py counts 518 instructions and 5 dots: its scan takes a shape to end at the first blank, and 32
      // instructions (10 of them dots) are written with shapes such as `f32[1, 1]`; a scan that allows the blank
      // counts 550 and 15.
      {"small/import.hlo", "foobar", "dummy_main", 172, 550, 15, 3, 5, 2, 11},
      {"small/multiple_gemm_fusions.hlo", "", "e", 5, 26, 3, 0, 0, 0, 0},
      {"small/sharded_computation.hlo", "pjit_ref_func", "main.107", 7, 100, 6, 0, 0, 0, 0},
      {"small/spmd.hlo", "module", "entry", 1, 5, 1, 0, 0, 0, 0},
      {"small/while_with_known_trip_count.hlo", "", "main", 3, 12, 0, 0, 0, 0, 0},
  };
  for (const Facts& f : files) {
    SCOPED_TRACE(f.file);
    Module m = read_module(data(f.file));
    EXPECT_EQ(m.name, f.module);
    EXPECT_EQ(m.entry_computation().name, f.entry);
    EXPECT_EQ(m.computations.size(), f.computations);
    EXPECT_EQ(m.instruction_count(), f.instructions);
    auto n = opcodes(m);
    EXPECT_EQ(n["dot"], f.dots);
    EXPECT_EQ(n["all-gather"], f.all_gather);
    EXPECT_EQ(n["all-reduce"], f.all_reduce);
    EXPECT_EQ(n["all-to-all"], f.all_to_all);
    EXPECT_EQ(n["custom-call"], f.custom_calls);
  }
}

TEST(HloParserTest, ReadsEachModuleOfALitFile) {
  // import_async.hlo holds 17 modules separated by `// -----` lines (facts.py: 73 instructions in 19 computations,
  // and 2 more it cannot see: `ROOT gte = get-tuple-element(recv-done), index=0` leaves out its shape).
  std::string text = read_module_text(data("small/import_async.hlo"));
  size_t modules = 0, comps = 0, instrs = 0;
  std::map<std::string, int> n;
  size_t at = 0;
  while (at < text.size()) {
    size_t next = text.find("// -----", at);
    std::string part = text.substr(at, next == std::string::npos ? std::string::npos : next - at);
    at = next == std::string::npos ? text.size() : next + 8;
    if (part.find("HloModule") == std::string::npos) continue;
    Module m = parse_module(part, "import_async.hlo");
    ++modules;
    comps += m.computations.size();
    instrs += m.instruction_count();
    for (auto& [k, v] : opcodes(m)) n[k] += v;
  }
  EXPECT_EQ(modules, 17u);
  EXPECT_EQ(comps, 19u);
  EXPECT_EQ(instrs, 75u);
  EXPECT_EQ(n["all-gather-start"], 2);
  EXPECT_EQ(n["all-reduce-start"], 2);
  EXPECT_EQ(n["collective-permute-start"], 2);
}

TEST(HloParserTest, InstructionsShapesAndAttributesAsWritten) {
  const std::string text = R"(HloModule m, is_scheduled=true, num_partitions=4

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %s = f32[] add(f32[] %a, %b)
}

ENTRY %main (p0: bf16[8,128], p1: (f32[2], s32[])) -> f32[8,128] {
  %p0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0), sharding={devices=[4,1]<=[4]}
  %p1 = (f32[2]{0}, /*index=1*/s32[]) parameter(1)
  %c = f32[2]{0} constant({1.5, -inf})
  %x = f32[8,128]{0,1} convert(%p0)
  ROOT %r = f32[8,128]{1,0} all-reduce(%x), channel_id=3,
      replica_groups=[2,2]<=[4], use_global_device_ids=true,
      to_apply=%add, metadata={op_name="a, b" source_line=3}
}
)";
  Module m = parse_module(text, "t.hlo");
  EXPECT_EQ(m.attr("num_partitions")->value, "4");
  EXPECT_EQ(m.attr("is_scheduled")->value, "true");
  ASSERT_EQ(m.computations.size(), 2u);
  const Computation& add = m.computations[0];
  EXPECT_EQ(add.instructions[add.root].opcode, "add");
  EXPECT_EQ(add.instructions[add.root].operands, (std::vector<int32_t>{0, 1}));
  const Computation& e = m.entry_computation();
  EXPECT_TRUE(e.entry);
  EXPECT_EQ(e.parameters, (std::vector<int32_t>{0, 1}));
  const Instruction& p0 = e.instructions[0];
  EXPECT_EQ(p0.shape.type, Type::BF16);
  EXPECT_EQ(p0.shape.dims, (std::vector<int64_t>{8, 128}));
  EXPECT_EQ(p0.shape.minor_to_major, (std::vector<int64_t>{1, 0}));
  EXPECT_DOUBLE_EQ(p0.shape.bytes(), 8 * 128 * 2);
  EXPECT_EQ(p0.attr("sharding")->value, "{devices=[4,1]<=[4]}");
  const Instruction& p1 = e.instructions[1];
  ASSERT_TRUE(p1.shape.is_tuple());
  EXPECT_EQ(p1.shape.tuple.size(), 2u);
  EXPECT_DOUBLE_EQ(p1.shape.bytes(), 2 * 4 + 4);
  EXPECT_EQ(e.instructions[2].literal, "{1.5, -inf}");
  EXPECT_EQ(e.instructions[3].shape.major_to_minor(), (std::vector<int64_t>{1, 0}));
  const Instruction& r = e.instructions[e.root];
  EXPECT_TRUE(r.root);
  EXPECT_EQ(r.opcode, "all-reduce");
  EXPECT_EQ(r.attr("replica_groups")->value, "[2,2]<=[4]");
  EXPECT_EQ(r.attr("to_apply")->value, "%add");
  EXPECT_EQ(r.attr("metadata")->value, "{op_name=\"a, b\" source_line=3}");
  EXPECT_EQ(r.attr("replica_groups")->pos.line, 15);
  EXPECT_EQ(r.attr("replica_groups")->pos.column, 7);
  EXPECT_EQ(r.pos.line, 14);
  EXPECT_EQ(m.find("%add"), 0);
}

TEST(HloParserTest, ModulesWithoutHeaderEntryOrRoot) {
  // small/while_with_known_trip_count.hlo: no HloModule line, no ENTRY (the last computation is the entry), no ROOT
  // (the last instruction is the root), and a while over two lines.
  Module m = read_module(data("small/while_with_known_trip_count.hlo"));
  EXPECT_EQ(m.entry_computation().name, "main");
  const Computation& main = m.entry_computation();
  EXPECT_EQ(main.instructions[main.root].name, "w");
  EXPECT_EQ(main.instructions[main.root].attr("backend_config")->value, "{\"known_trip_count\":{\"n\":\"7\"}}");
  EXPECT_EQ(main.instructions[main.root].attr("body")->value, "body");
}

TEST(HloParserTest, ErrorsNameFileLineColumnAndToken) {
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2] parameter(0)\n  b = f32[2] negate(c)\n}\n"),
            "t.hlo:3:21 PODSIM-HLO-002 instruction 'b' reads 'c', which computation 'e' does not define");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f33[2] parameter(0)\n}\n"),
            "t.hlo:2:7 PODSIM-HLO-001 unknown element type 'f33' (valid: pred, s8, s32, u32, bf16, f16, f32, f64, ...)");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2 parameter(0)\n}\n"),
            "t.hlo:2:13 PODSIM-HLO-001 expected ',' or ']' in the dimensions, found 'parameter'");
  EXPECT_EQ(parse_error("ENTRY e {\n  a f32[2] parameter(0)\n}\n"),
            "t.hlo:2:5 PODSIM-HLO-001 expected '=' after instruction 'a', found 'f32'");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2] parameter(0)\n"),
            "t.hlo:1:7 PODSIM-HLO-001 computation 'e' is never closed with '}'");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2] add(a, a), dimensions={0\n"),
            "t.hlo:2:36 PODSIM-HLO-001 a '{' that is never closed (expected '}')");
  EXPECT_EQ(parse_error("HloModule a\nENTRY e {\n  p = f32[] parameter(0)\n}\nHloModule b\n"),
            "t.hlo:5:1 PODSIM-HLO-001 a second 'HloModule': the file holds several modules (split it at its `// -----` "
            "lines)");
  EXPECT_EQ(parse_error(""), "t.hlo:1:1 PODSIM-HLO-001 no computation: an HLO module has at least its entry computation");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2] parameter(0)\n  a = f32[2] parameter(1)\n}\n"),
            "t.hlo:3:3 PODSIM-HLO-002 instruction 'a' is defined twice in 'e'");
  EXPECT_EQ(parse_error("ENTRY e {\n  a = f32[2]{0,1} parameter(0)\n}\n"),
            "t.hlo:2:13 PODSIM-HLO-001 the layout lists 2 dimensions for a shape of 1");
}
