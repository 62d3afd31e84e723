// The sweep's progress on stderr, runs done of all and failures either way. On a terminal: one line rewritten in
// place ("sweep x: 12/40 done, 1 failed, 2 running, elapsed 0:34, ETA 1:20"), with a line of its own for each
// failure. Elsewhere (a log file, CI): one plain line per finished run ("[12/40 done, 1 failed] done    name
// (0.21 s)"), so nothing depends on carriage returns; both end with the status line.
#pragma once

#include <cstdio>
#include <string>

#include "sim/sweep/status.h"

namespace podsim {

class Progress {
 public:
  // `total` runs in the plan, `done_before` of them already done when this driver started.
  Progress(std::string sweep, size_t total, size_t done_before, bool tty, FILE* out = stderr);

  void set_running(size_t n);
  void finished(const RunStatus& s);
  void note(const std::string& line);  // a message of its own line
  void tick();                          // redraws the terminal line (at most a few times a second)
  void end();                           // the final line

  size_t done() const { return m_done; }
  size_t failed() const { return m_failed; }

 private:
  std::string status_line() const;
  void draw();

  std::string m_sweep;
  size_t m_total, m_done, m_done_before, m_failed = 0, m_running = 0;
  bool m_tty;
  FILE* m_out;
  double m_start, m_last_draw = -1;
};

}  // namespace podsim
