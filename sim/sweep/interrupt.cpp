#include "sim/sweep/interrupt.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <mutex>

namespace podsim {
namespace {

int g_pipe[2] = {-1, -1};
std::atomic<int> g_signal{0};

void on_signal(int sig) {
  g_signal.store(sig);
  unsigned char b = static_cast<unsigned char>(sig);
  ssize_t ignored = write(g_pipe[1], &b, 1);
  (void)ignored;
}

}  // namespace

int sweep_interrupt_fd() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (pipe2(g_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction sa;
    std::memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  });
  return g_pipe[0];
}

int sweep_interrupted() { return g_signal.load(); }

}  // namespace podsim
