// An XLA HLO module as its text form holds it (hlo/parser.h reads it): computations of instructions, each with a
// shape, an opcode, operands and attributes. Pure data, no meaning: hlo/attributes.h reads the attributes the
// importer needs (groups, shardings, windows, ...), hlo/import.h turns a module into podsim's program.
//
//   hlo::Module m = hlo::parse_module(text, "step.hlo");
//   const hlo::Computation& entry = m.entry_computation();
//   for (const hlo::Instruction& in : entry.instructions) ... in.opcode, in.shape, in.operands, in.attr("dimensions")
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace podsim::hlo {

// Element types as XLA names them (xla_data.proto's PrimitiveType).
enum class Type : uint8_t {
  Invalid, Pred, S2, S4, S8, S16, S32, S64, U2, U4, U8, U16, U32, U64, F16, BF16, F32, F64, F4E2M1FN, F8E3M4, F8E4M3,
  F8E4M3FN, F8E4M3B11FNUZ, F8E4M3FNUZ, F8E5M2, F8E5M2FNUZ, F8E8M0FNU, C64, C128, Token, Tuple, Opaque
};
const char* type_name(Type t);            // "f32", "bf16", "pred", "(tuple)", ...
Type type_from_name(std::string_view s);  // Type::Invalid when unknown
int type_bits(Type t);                    // bits per element (0 for token, tuple, opaque)
bool is_float(Type t);
bool is_integer(Type t);                  // signed and unsigned, not pred

// A shape: an array (element type, dimensions, layout) or a tuple of shapes.
struct Shape {
  Type type = Type::Invalid;  // Invalid: the text left the shape out (newer XLA infers some)
  std::vector<int64_t> dims;  // -1: an unbounded dynamic dimension ('?')
  // The layout's minor-to-major order ({1,0} for a row-major matrix); empty when the text gives none (the default,
  // row-major).
  std::vector<int64_t> minor_to_major;
  // The layout's tiles (TPU shapes, ":T(8,128)(2,1)": two tiles, each padding the minor dimensions it covers) and
  // memory space (":S(5)", the host on TPUs; 0 when none is given).
  std::vector<std::vector<int64_t>> tiles;
  int64_t memory_space = 0;
  std::vector<Shape> tuple;

  bool is_tuple() const { return type == Type::Tuple; }
  bool is_array() const { return type != Type::Tuple && type != Type::Token && type != Type::Opaque; }
  int64_t elements() const;       // product of dims (1 for a scalar); arrays only
  bool dynamic() const;           // has an unbounded dimension (here or in a tuple element)
  double bytes() const;           // an array's bytes (sub-byte types rounded up per array); a tuple's leaves summed
  // The layout's order from major to minor; the default (row-major) when the text gave none.
  std::vector<int64_t> major_to_minor() const;
  std::string text() const;       // "f32[2,3]{1,0}", "(f32[], s32[4])"
};

// 1-based line and column in the module's text.
struct Pos {
  int32_t line = 0, column = 0;
};

// An attribute as written: `name=value`, the value's text verbatim (balanced brackets, strings kept whole).
struct Attribute {
  std::string name;
  std::string value;
  Pos pos;        // of the name
  Pos value_pos;  // of the value's first character
};

struct Instruction {
  std::string name;    // without '%'
  std::string opcode;  // "dot", "all-reduce-start", "custom-call", ...
  Shape shape;
  std::vector<int32_t> operands;  // indices of instructions of the same computation
  std::vector<Pos> operand_pos;   // where each operand is named
  std::vector<Attribute> attrs;
  std::string literal;  // constant(...): the literal's text between the parentheses
  bool root = false;
  Pos pos;              // of the name

  const Attribute* attr(std::string_view name) const;  // nullptr when absent
};

struct Computation {
  std::string name;
  bool entry = false;
  std::vector<Instruction> instructions;  // in text order
  int32_t root = -1;                      // ROOT, or the last instruction when none is marked
  std::vector<int32_t> parameters;        // instruction of parameter(i) at index i
  Pos pos;

  int32_t find(std::string_view name) const;  // -1 when absent
  std::unordered_map<std::string, int32_t> index;
};

struct Module {
  std::string name;  // from the HloModule line ("" when the text has none)
  std::string file;  // for messages
  std::vector<Attribute> attrs;  // of the HloModule line: is_scheduled, num_partitions, input_output_alias, ...
  std::vector<Computation> computations;  // in text order
  int32_t entry = -1;                     // ENTRY, or the last computation when none is marked

  const Computation& entry_computation() const { return computations.at(static_cast<size_t>(entry)); }
  int32_t find(std::string_view name) const;  // computation index, -1 when absent
  const Attribute* attr(std::string_view name) const;
  size_t instruction_count() const;
  std::unordered_map<std::string, int32_t> index;
};

}  // namespace podsim::hlo
