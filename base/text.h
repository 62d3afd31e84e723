// Small text helpers shared by config errors, listings and reports.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace podsim {

// Edit distance (insert, delete, substitute, adjacent transposition), used for "did you mean" suggestions.
size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, or "" when none is a plausible typo of it: a suggestion must be at most
// suggestion_limit(word) = max(1, len(word) / 3) edits away (letter case ignored; len in bytes, rounded down) and
// strictly nearer than every other candidate. So "dtyp" -> "dtype", "pipline" -> "pipeline", but "foo" gets no
// suggestion (the nearest, "moe", is 2 edits away and 1 is the limit for 3 letters).
std::string nearest(std::string_view word, const std::vector<std::string>& candidates);
size_t suggestion_limit(std::string_view word);

std::string join(const std::vector<std::string>& parts, std::string_view sep);
// The parts joined by ", " between `open` and `close`: "[a, b]" (a YAML flow list, a sharding spec), "(x, y)".
std::string bracketed(const std::vector<std::string>& parts, char open = '[', char close = ']');

// "did you mean 'x'?" when nearest() finds one, otherwise "valid: a, b, c" (every candidate).
std::string suggestion(std::string_view word, const std::vector<std::string>& candidates);

// Human formatting: 1.50 GiB, 812.3 GB/s, 1.234 ms, 940 MHz, 1.23e+12 FLOP.
std::string format_bytes(double bytes);
std::string format_bandwidth(double bytes_per_s);
std::string format_time(double seconds);
std::string format_frequency(double hz);
std::string format_count(double n);  // 1.23k, 4.56M, 7.89G

// printf-style into std::string.
std::string strprintf(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace podsim
