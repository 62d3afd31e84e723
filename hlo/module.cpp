#include "hlo/module.h"

#include <algorithm>
#include <cmath>

namespace podsim::hlo {
namespace {

struct TypeEntry {
  Type type;
  const char* name;
  int bits;
};

const TypeEntry kTypes[] = {
    {Type::Pred, "pred", 8},        {Type::S2, "s2", 2},
    {Type::S4, "s4", 4},            {Type::S8, "s8", 8},
    {Type::S16, "s16", 16},         {Type::S32, "s32", 32},
    {Type::S64, "s64", 64},         {Type::U2, "u2", 2},
    {Type::U4, "u4", 4},            {Type::U8, "u8", 8},
    {Type::U16, "u16", 16},         {Type::U32, "u32", 32},
    {Type::U64, "u64", 64},         {Type::F16, "f16", 16},
    {Type::BF16, "bf16", 16},       {Type::F32, "f32", 32},
    {Type::F64, "f64", 64},         {Type::F4E2M1FN, "f4e2m1fn", 4},
    {Type::F8E3M4, "f8e3m4", 8},    {Type::F8E4M3, "f8e4m3", 8},
    {Type::F8E4M3FN, "f8e4m3fn", 8}, {Type::F8E4M3B11FNUZ, "f8e4m3b11fnuz", 8},
    {Type::F8E4M3FNUZ, "f8e4m3fnuz", 8}, {Type::F8E5M2, "f8e5m2", 8},
    {Type::F8E5M2FNUZ, "f8e5m2fnuz", 8}, {Type::F8E8M0FNU, "f8e8m0fnu", 8},
    {Type::C64, "c64", 64},         {Type::C128, "c128", 128},
    {Type::Token, "token", 0},      {Type::Opaque, "opaque", 0},
};

}  // namespace

const char* type_name(Type t) {
  if (t == Type::Tuple) return "(tuple)";
  for (const auto& e : kTypes)
    if (e.type == t) return e.name;
  return "?";
}

Type type_from_name(std::string_view s) {
  for (const auto& e : kTypes)
    if (s == e.name) return e.type;
  return Type::Invalid;
}

int type_bits(Type t) {
  for (const auto& e : kTypes)
    if (e.type == t) return e.bits;
  return 0;
}

bool is_float(Type t) {
  switch (t) {
    case Type::F16: case Type::BF16: case Type::F32: case Type::F64: case Type::F4E2M1FN: case Type::F8E3M4:
    case Type::F8E4M3: case Type::F8E4M3FN: case Type::F8E4M3B11FNUZ: case Type::F8E4M3FNUZ: case Type::F8E5M2:
    case Type::F8E5M2FNUZ: case Type::F8E8M0FNU: case Type::C64: case Type::C128:
      return true;
    default:
      return false;
  }
}

bool is_integer(Type t) {
  switch (t) {
    case Type::S2: case Type::S4: case Type::S8: case Type::S16: case Type::S32: case Type::S64: case Type::U2:
    case Type::U4: case Type::U8: case Type::U16: case Type::U32: case Type::U64:
      return true;
    default:
      return false;
  }
}

int64_t Shape::elements() const {
  int64_t n = 1;
  for (int64_t d : dims) n *= std::max<int64_t>(d, 0);
  return n;
}

bool Shape::dynamic() const {
  for (int64_t d : dims)
    if (d < 0) return true;
  for (const Shape& s : tuple)
    if (s.dynamic()) return true;
  return false;
}

double Shape::bytes() const {
  if (is_tuple()) {
    double b = 0;
    for (const Shape& s : tuple) b += s.bytes();
    return b;
  }
  if (!is_array()) return 0;
  return std::ceil(static_cast<double>(elements()) * type_bits(type) / 8.0);
}

std::vector<int64_t> Shape::major_to_minor() const {
  std::vector<int64_t> out;
  if (minor_to_major.empty()) {
    for (size_t i = 0; i < dims.size(); ++i) out.push_back(static_cast<int64_t>(i));
  } else {
    out.assign(minor_to_major.rbegin(), minor_to_major.rend());
  }
  return out;
}

std::string Shape::text() const {
  if (is_tuple()) {
    std::string s = "(";
    for (size_t i = 0; i < tuple.size(); ++i) s += (i ? ", " : "") + tuple[i].text();
    return s + ")";
  }
  std::string s = std::string(type_name(type)) + "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(dims[i]);
  }
  s += "]";
  if (!minor_to_major.empty()) {
    s += "{";
    for (size_t i = 0; i < minor_to_major.size(); ++i) {
      if (i) s += ',';
      s += std::to_string(minor_to_major[i]);
    }
    if (!tiles.empty() || memory_space != 0) s += ":";
    if (!tiles.empty()) s += "T";
    for (const std::vector<int64_t>& t : tiles) {
      s += '(';
      for (size_t i = 0; i < t.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(t[i]);
      }
      s += ')';
    }
    if (memory_space != 0) {
      s += "S(";
      s += std::to_string(memory_space);
      s += ')';
    }
    s += "}";
  }
  return s;
}

const Attribute* Instruction::attr(std::string_view n) const {
  for (const Attribute& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

int32_t Computation::find(std::string_view n) const {
  auto it = index.find(std::string(n));
  return it == index.end() ? -1 : it->second;
}

int32_t Module::find(std::string_view n) const {
  if (!n.empty() && n.front() == '%') n.remove_prefix(1);
  auto it = index.find(std::string(n));
  return it == index.end() ? -1 : it->second;
}

const Attribute* Module::attr(std::string_view n) const {
  for (const Attribute& a : attrs)
    if (a.name == n) return &a;
  return nullptr;
}

size_t Module::instruction_count() const {
  size_t n = 0;
  for (const Computation& c : computations) n += c.instructions.size();
  return n;
}

}  // namespace podsim::hlo
