// Quantities with units, parsed once from YAML text into base units:
//   frequency -> Hz, bandwidth -> bytes/s, size -> bytes, time -> seconds.
//
//   parse_quantity(Quantity::Bandwidth, "900GB/s")  -> 9e11
//   parse_quantity(Quantity::Size, "32GiB")         -> 34359738368
//
// Decimal prefixes (k, M, G, T) are powers of 1000, binary ones (Ki, Mi, Gi, Ti) powers of 1024; "bit" and "bps"
// forms of bandwidth are divided by 8. A bare number is refused: every quantity states its unit.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace podsim {

enum class Quantity { Frequency, Bandwidth, Size, Time };

struct QuantityParse {
  std::optional<double> value;  // in base units, when the text parsed
  std::string problem;          // why it did not parse, when it did not
};

QuantityParse parse_quantity(Quantity kind, std::string_view text);

// Units accepted for a kind, for error messages and docs ("Hz, kHz, MHz, GHz").
const std::vector<std::string>& units_of(Quantity kind);
const char* base_unit(Quantity kind);  // "Hz", "B/s", "B", "s"
const char* quantity_name(Quantity kind);  // "frequency", ...

// Canonical text for a value in base units, choosing a readable unit: 9e11 -> "900GB/s", 1e-6 -> "1us".
// parse_quantity(kind, format_quantity(kind, v)) gives v back (to 12 significant digits).
std::string format_quantity(Quantity kind, double value);

}  // namespace podsim
