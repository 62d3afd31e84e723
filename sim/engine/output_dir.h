// A run's output folder, written atomically: everything goes to a hidden ".<name>.partial-<pid>" sibling that is
// renamed to the final name only when the run succeeded. A failed or interrupted run leaves nothing that looks
// complete (SIGINT/SIGTERM/SIGHUP also remove the partial folder when install_interrupt_cleanup() ran; after
// SIGKILL it stays hidden and a later run of the same name removes it).
#pragma once

#include <string>

namespace podsim {

class OutputDir {
 public:
  // Refuses an existing final folder unless `force` (PODSIM-IO-002); creates the partial folder (PODSIM-IO-003).
  OutputDir(const std::string& final_path, bool force);
  ~OutputDir();  // removes the partial folder unless committed
  OutputDir(const OutputDir&) = delete;
  OutputDir& operator=(const OutputDir&) = delete;

  const std::string& path() const { return m_partial; }  // where to write now
  const std::string& final_path() const { return m_final; }
  std::string file(const std::string& name) const { return m_partial + "/" + name; }
  // Moves the partial folder to the final name (replacing an old folder when forced).
  void commit();

 private:
  std::string m_final;
  std::string m_partial;
  bool m_force;
  bool m_committed = false;
};

// Removes the partial folder of the run in progress (if any); for the watchdog, which ends the process.
void abandon_partial_output();

// Call once at the start of main(): on SIGINT, SIGTERM or SIGHUP a cleanup thread removes the partial folder of the
// run in progress and ends the process with status 128 + signal. The handler only writes the signal number to a
// pipe the thread reads: removing a folder allocates, and the signal may have interrupted an allocation.
void install_interrupt_cleanup();

}  // namespace podsim
