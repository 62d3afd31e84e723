#include "base/text.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>

namespace podsim {

size_t edit_distance(std::string_view a, std::string_view b) {
  const size_t n = a.size(), m = b.size();
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    for (size_t j = 1; j <= m; ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[n][m];
}

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

size_t suggestion_limit(std::string_view word) { return std::max<size_t>(1, word.size() / 3); }

std::string nearest(std::string_view word, const std::vector<std::string>& candidates) {
  // Letter case is ignored ("mhz" is one step from "MHz", not two); the exact spelling only breaks ties.
  const std::string w = lower(word);
  std::string best;
  std::pair<size_t, size_t> best_d{SIZE_MAX, SIZE_MAX};
  bool tie = false;
  for (const auto& c : candidates) {
    std::pair<size_t, size_t> d{edit_distance(w, lower(c)), edit_distance(word, c)};
    if (d < best_d) {
      best_d = d;
      best = c;
      tie = false;
    } else if (d == best_d && c != best) {
      tie = true;
    }
  }
  // A typo changes about a third of a word at most; beyond that, or when two candidates are as near, a
  // "suggestion" would be an arbitrary pick.
  if (best.empty() || tie || best_d.first > suggestion_limit(word)) return {};
  return best;
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += sep;
    out += parts[i];
  }
  return out;
}

std::string bracketed(const std::vector<std::string>& parts, char open, char close) {
  std::string out(1, open);
  out += join(parts, ", ");
  out += close;
  return out;
}

std::string suggestion(std::string_view word, const std::vector<std::string>& candidates) {
  std::string near = nearest(word, candidates);
  if (!near.empty()) return "did you mean '" + near + "'?";
  return "valid: " + join(candidates, ", ");
}

std::string strprintf(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char buf[512];
  va_list ap2;
  va_copy(ap2, ap);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::string out;
  if (n < static_cast<int>(sizeof buf)) {
    out.assign(buf, n < 0 ? 0 : n);
  } else {
    out.resize(n + 1);
    std::vsnprintf(out.data(), n + 1, fmt, ap2);
    out.resize(n);
  }
  va_end(ap2);
  return out;
}

static std::string scaled(double v, const char* const* units, int count, double step, const char* fmt) {
  int i = 0;
  double a = std::fabs(v);
  while (i + 1 < count && a >= step) {
    a /= step;
    v /= step;
    ++i;
  }
  return strprintf(fmt, v, units[i]);
}

std::string format_bytes(double bytes) {
  static const char* const u[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  return scaled(bytes, u, 6, 1024.0, "%.2f %s");
}

std::string format_bandwidth(double bps) {
  static const char* const u[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return scaled(bps, u, 6, 1000.0, "%.1f %s");
}

std::string format_frequency(double hz) {
  static const char* const u[] = {"Hz", "kHz", "MHz", "GHz"};
  return scaled(hz, u, 4, 1000.0, "%.4g %s");  // 940 MHz, 1.05 GHz, 1.5 GHz: the decimals a clock has
}

std::string format_count(double n) {
  static const char* const u[] = {"", "k", "M", "G", "T", "P", "E"};
  return scaled(n, u, 7, 1000.0, "%.3g%s");
}

std::string format_time(double s) {
  double a = std::fabs(s);
  if (a == 0) return "0 s";
  if (a < 1e-6) return strprintf("%.1f ns", s * 1e9);
  if (a < 1e-3) return strprintf("%.3f us", s * 1e6);
  if (a < 1) return strprintf("%.3f ms", s * 1e3);
  return strprintf("%.3f s", s);
}

}  // namespace podsim
