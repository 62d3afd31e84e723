// The StableHLO reader's internals (hlo/stablehlo_parser.h is its interface): MLIR text read into operations as
// written (stablehlo_read.cpp with the cursor of stablehlo_cursor.h; types and attribute values in
// stablehlo_types.cpp), then lowered onto the hlo::Module the HLO text parser makes (stablehlo_lower.h).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/error.h"
#include "hlo/module.h"

namespace podsim::hlo::mlir {

// Where each line of the text starts: offsets to line:column.
class Lines {
 public:
  Lines(std::string_view text, std::string file);
  Pos pos(size_t at) const;
  const std::string& file() const { return m_file; }
  std::string_view text() const { return m_text; }
  [[noreturn]] void fail(size_t at, Err e, const std::string& what) const;

 private:
  std::string_view m_text;
  std::string m_file;
  std::vector<size_t> m_starts;
};

struct Attr {
  std::string value;  // the value's text as written (`1 : i64`, `array<i64: 1, 2>`, `dense<0> : tensor<2xi64>`, ...)
  size_t at = 0;      // offset of the value
};

struct Region;

// A quantized element type `!quant.uniform<i8:f32, 0.1:-3>` (or per axis, `<i8:f32:1, {0.1:-3, 0.2:1}>`): its
// storage type is the element type read; this, the rest.
struct Quant {
  bool any = false;
  Type expressed = Type::F32;
  int64_t axis = -1;             // per tensor: -1
  std::vector<double> scales;    // one, or one per index along `axis`
  std::vector<int64_t> zeros;
  int64_t lo = 0, hi = 0;        // the storage range (`i8<-127:127>`, else the type's)
};

// One operation as the text writes it, in either form. Pretty forms are read into the same fields: the operands,
// the attributes by name (keywords such as `dims = [1]` and `{...}` dictionaries alike), bare words in `words`
// (`LT`, `SIGNED`, `applies`), a callee in `symbol` (`@f`), bracketed groups in `groups`.
struct Op {
  std::string name;  // "stablehlo.add", "func.call", "sdy.manual_computation", ...
  size_t at = 0;     // offset of the name
  Pos pos;
  std::vector<std::string> results;  // "%0" or "%0#0", "%0#1", ... for an op of several results
  std::vector<std::string> operands;  // "%arg0", "%3", "%4#1"
  std::vector<size_t> operand_at;
  std::map<std::string, Attr> attrs;
  std::vector<std::string> words;
  std::vector<Attr> groups;  // `[0:33, 0:79]`, `<@mesh, [{"y"}]>`, ...: inner text
  std::string symbol;        // callee or custom-call target, without '@'
  std::vector<Shape> operand_types, result_types;
  std::vector<Quant> operand_quant, result_quant;  // beside each type
  std::vector<std::unique_ptr<Region>> regions;
  std::vector<std::pair<std::string, std::string>> bindings;  // while's `%iterArg = %0`, reduce's `(%x init: %c)`
};

struct Region {
  std::vector<std::string> args;  // block arguments
  std::vector<Shape> arg_types;
  std::vector<Op> ops;
};

struct Func {
  std::string name;
  size_t at = 0;
  Pos pos;
  bool is_public = true;
  std::vector<std::map<std::string, Attr>> arg_attrs, result_attrs;
  Region body;
  std::vector<Shape> result_types;
};

struct MlirModule {
  std::string name;
  size_t at = 0;
  std::map<std::string, Attr> attrs;
  std::vector<Func> funcs;
  std::map<std::string, std::vector<std::pair<std::string, int64_t>>> meshes;  // sdy.mesh @name = <["x"=2, ...]>
};

MlirModule read(const Lines& lines);

// Types: tensor<4x8xbf16>, tensor<f32>, tuple<...>, !stablehlo.token, i32, complex<f32>.
Shape parse_type(const Lines& lines, size_t& at, size_t end, Quant* quant = nullptr);

// Attribute readers.
std::vector<int64_t> int_array(const Lines& l, const Attr& a);  // `[1, 2]`, `array<i64: 1, 2>`, `dense<[1, 2]> : ...`
int64_t int_value(const Lines& l, const Attr& a);               // `1 : i64`, `1`
// The text of `key = value` inside `#stablehlo.gather<key = [..], ...>` and similar; "" when absent.
std::string field(const std::string& text, const std::string& key);
std::vector<int64_t> ints_in(const std::string& text);  // every whole number in the text, in order
std::string unquote(const std::string& s);
// The string `key = "..."` of a dictionary's text (`mhlo.frontend_attributes = {xla.sdy.sharding = "..."}`), its
// escapes undone; "" when absent.
std::string string_field(const std::string& dict, const std::string& key);
// Shardy's mesh axes `["x"=2, "y"=4]` in `text` (an `sdy.mesh` or a `#sdy.mesh<...>`).
std::vector<std::pair<std::string, int64_t>> mesh_axes(const Lines& l, size_t at, const std::string& text);

Module lower(const Lines& lines, const MlirModule& m);

}  // namespace podsim::hlo::mlir
