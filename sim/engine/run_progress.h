// The progress line of a long run: on a terminal, once the simulation has run for a couple of seconds of wall time,
// one line on stderr rewritten in place twice a second with the simulated time reached, the model activations
// (events), the ops done of all ops, and the wall time; cleared when the simulation ends. Nothing when stderr is not
// a terminal, or when the caller asks for none (podsim run -q).
//
//   RunProgress progress(enabled, ops_total, ctx.ops_completed);   // before sc_start
//   sc_core::sc_start();
//   progress.stop();                                                 // joins the thread, clears the line
//
// It reads atomics the simulation publishes (hw/chip/sim_time.h, PodContext::ops_completed) from its own thread,
// and changes nothing the simulation computes. PODSIM_PROGRESS_AFTER (seconds, default 2) sets when the line first
// appears; 0 draws it at once, before the simulation starts, which is how the tests see it without depending on the
// machine's speed.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace podsim {

class RunProgress {
 public:
  // `enabled`: wanted by the caller; the line also needs stderr to be a terminal.
  RunProgress(bool enabled, int64_t ops_total, const std::atomic<int64_t>& ops_done, FILE* out = stderr);
  ~RunProgress();
  RunProgress(const RunProgress&) = delete;
  RunProgress& operator=(const RunProgress&) = delete;
  void stop();

  // What the line says now (for a snapshot; the thread draws the same).
  std::string line() const;

 private:
  void draw();

  const int64_t m_ops_total;
  const std::atomic<int64_t>& m_ops_done;
  FILE* m_out;
  const std::chrono::steady_clock::time_point m_start;
  std::mutex m_mutex;
  std::condition_variable m_cv;
  bool m_stop = false, m_drawn = false;
  std::thread m_thread;
};

}  // namespace podsim
