// Runs a command-line tool (sbatch, squeue, scontrol) without a shell and captures what it prints.
#pragma once

#include <string>
#include <vector>

namespace podsim {

struct CommandResult {
  int code = -1;       // exit code; 127 when the program could not be started
  std::string output;  // stdout and stderr together
};

CommandResult run_command(const std::vector<std::string>& argv);

// "sbatch --parsable ..." for messages: arguments with spaces or quotes are single-quoted.
std::string command_text(const std::vector<std::string>& argv);

}  // namespace podsim
