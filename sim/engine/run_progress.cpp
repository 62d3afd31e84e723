#include "sim/engine/run_progress.h"

#include <unistd.h>

#include <cstdlib>

#include "hw/chip/sim_time.h"
#include "base/text.h"

namespace podsim {
namespace {

// PODSIM_PROGRESS_AFTER, in seconds; 2 when unset or not a number >= 0.
double progress_after() {
  const char* v = std::getenv("PODSIM_PROGRESS_AFTER");
  if (!v || !*v) return 2.0;
  char* end = nullptr;
  double s = std::strtod(v, &end);
  return end && *end == 0 && s >= 0 ? s : 2.0;
}

constexpr std::chrono::milliseconds kRedraw{500};

}  // namespace

RunProgress::RunProgress(bool enabled, int64_t ops_total, const std::atomic<int64_t>& ops_done, FILE* out)
    : m_ops_total(ops_total), m_ops_done(ops_done), m_out(out), m_start(std::chrono::steady_clock::now()) {
  g_progress_seconds.store(0, std::memory_order_relaxed);
  g_progress_activations.store(0, std::memory_order_relaxed);
  if (!enabled || !isatty(fileno(out))) return;
  const double after = progress_after();
  if (after == 0) draw();  // at once: the line is there whatever the machine's speed
  m_thread = std::thread([this, after] {
    std::unique_lock<std::mutex> lock(m_mutex);
    if (m_cv.wait_for(lock, std::chrono::duration<double>(after), [this] { return m_stop; })) return;
    do draw();
    while (!m_cv.wait_for(lock, kRedraw, [this] { return m_stop; }));
  });
}

RunProgress::~RunProgress() { stop(); }

void RunProgress::stop() {
  {
    std::lock_guard<std::mutex> lock(m_mutex);
    m_stop = true;
  }
  m_cv.notify_all();
  if (m_thread.joinable()) m_thread.join();
  if (m_drawn) {
    std::fputs("\r\033[K", m_out);
    std::fflush(m_out);
    m_drawn = false;
  }
}

std::string RunProgress::line() const {
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count();
  const int64_t done = m_ops_done.load(std::memory_order_relaxed);
  const double events = static_cast<double>(g_progress_activations.load(std::memory_order_relaxed));
  return strprintf("simulating: %s simulated, %s events, %lld of %lld ops (%.0f %%), %.1f s",
                   format_time(g_progress_seconds.load(std::memory_order_relaxed)).c_str(),
                   format_count(events).c_str(), static_cast<long long>(done), static_cast<long long>(m_ops_total),
                   m_ops_total > 0 ? 100.0 * static_cast<double>(done) / static_cast<double>(m_ops_total) : 0.0, wall);
}

// Called with m_mutex held (or before the thread starts).
void RunProgress::draw() {
  std::fprintf(m_out, "\r\033[K%s", line().c_str());
  std::fflush(m_out);
  m_drawn = true;
}

}  // namespace podsim
