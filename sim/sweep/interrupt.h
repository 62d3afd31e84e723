// SIGINT, SIGTERM and SIGHUP for a process that supervises runs (the sweep driver, a Slurm task): the handler only
// writes the signal number into a pipe that the supervisor's poll() watches, so it can stop its children and
// leave a consistent folder behind. Replaces podsim's default interrupt cleanup for this process.
#pragma once

namespace podsim {

// Installs the handlers (once); returns the pipe's read end.
int sweep_interrupt_fd();
// The signal received, or 0.
int sweep_interrupted();

}  // namespace podsim
