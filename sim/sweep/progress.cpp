#include "sim/sweep/progress.h"

#include "base/text.h"

namespace podsim {
namespace {

std::string clock_text(double s) {
  long t = static_cast<long>(s + 0.5);
  if (t >= 3600) return strprintf("%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
  return strprintf("%ld:%02ld", t / 60, t % 60);
}

}  // namespace

Progress::Progress(std::string sweep, size_t total, size_t done_before, bool tty, FILE* out)
    : m_sweep(std::move(sweep)), m_total(total), m_done(done_before), m_done_before(done_before), m_tty(tty),
      m_out(out), m_start(monotonic_seconds()) {}

std::string Progress::status_line() const {
  double elapsed = monotonic_seconds() - m_start;
  size_t finished_here = m_done - m_done_before + m_failed;
  size_t left = m_total - m_done - m_failed;
  std::string eta = "--";
  if (finished_here > 0 && left > 0) eta = clock_text(elapsed / static_cast<double>(finished_here) * static_cast<double>(left));
  if (left == 0) eta = "0:00";
  return strprintf("sweep %s: %zu/%zu done, %zu failed, %zu running, elapsed %s, ETA %s", m_sweep.c_str(), m_done,
                   m_total, m_failed, m_running, clock_text(elapsed).c_str(), eta.c_str());
}

void Progress::draw() {
  std::fprintf(m_out, "\r\033[K%s", status_line().c_str());
  std::fflush(m_out);
  m_last_draw = monotonic_seconds();
}

void Progress::set_running(size_t n) { m_running = n; }

void Progress::finished(const RunStatus& s) {
  if (s.done()) ++m_done;
  else ++m_failed;
  std::string what = s.done() ? strprintf("done    %s (%.2f s)", s.name.c_str(), s.wall_s)
                              : "FAILED  " + s.name +
                                    (s.timed_out        ? std::string(" (timed out)")
                                     : s.exit_code     ? strprintf(" (exit %d)", *s.exit_code)
                                     : s.signal        ? strprintf(" (signal %d)", *s.signal)
                                                       : std::string());
  if (!s.done() && !s.stderr_tail.empty()) {
    std::string last = s.stderr_tail.substr(s.stderr_tail.rfind('\n') == std::string::npos ? 0 : s.stderr_tail.rfind('\n') + 1);
    what += ": " + (last.size() > 300 ? last.substr(0, 297) + "..." : last);
  }
  if (m_tty) {
    if (!s.done()) std::fprintf(m_out, "\r\033[K%s\n", what.c_str());
    draw();
  } else {
    std::fprintf(m_out, "[%zu/%zu done, %zu failed] %s\n", m_done, m_total, m_failed, what.c_str());
    std::fflush(m_out);
  }
}

void Progress::note(const std::string& line) {
  std::fprintf(m_out, m_tty ? "\r\033[K%s\n" : "%s\n", line.c_str());
  if (m_tty) draw();
  std::fflush(m_out);
}

void Progress::tick() {
  if (m_tty && monotonic_seconds() - m_last_draw > 0.25) draw();
}

void Progress::end() {
  if (m_tty) std::fprintf(m_out, "\r\033[K");
  m_running = 0;
  std::fprintf(m_out, "%s\n", status_line().c_str());
  std::fflush(m_out);
}

}  // namespace podsim
