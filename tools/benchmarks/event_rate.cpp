// The raw SystemC event rate of this machine: one SC_METHOD notifying its own event with a delay, as often as the
// kernel can run it, per CPU second. tools/bench prints every case's activations per second as a fraction of this, so figures
// compare across machines. Also measures a ring of many modules each waking the next (the kernel's cost with a
// large event queue, as in a pod).
//
//   bench_event_rate [events] [modules]    -> {"self_notify_per_s": ..., "ring_per_s": ..., ...} on stdout
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <systemc>
#include <vector>

namespace {

// CPU seconds of this process: steadier than wall time on a machine shared with other work.
double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

uint64_t g_fired = 0;
uint64_t g_limit = 0;

struct SelfNotify : sc_core::sc_module {
  sc_core::sc_event ev;
  SC_HAS_PROCESS(SelfNotify);
  explicit SelfNotify(sc_core::sc_module_name n) : sc_core::sc_module(n) {
    SC_METHOD(fire);
    sensitive << ev;
    dont_initialize();
  }
  void fire() {
    if (++g_fired < g_limit) ev.notify(1, sc_core::SC_NS);
  }
};

// Each module wakes at its own times, so the kernel's timed queue holds one entry per module.
struct Ticker : sc_core::sc_module {
  sc_core::sc_event ev;
  uint64_t period;
  SC_HAS_PROCESS(Ticker);
  Ticker(sc_core::sc_module_name n, uint64_t p) : sc_core::sc_module(n), period(p) {
    SC_METHOD(fire);
    sensitive << ev;
    dont_initialize();
  }
  void fire() {
    if (++g_fired < g_limit) ev.notify(static_cast<double>(period), sc_core::SC_PS);
  }
};

}  // namespace

int sc_main(int argc, char** argv) {
  const uint64_t events = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 20000000;
  const int modules = argc > 2 ? std::atoi(argv[2]) : 4096;
  sc_core::sc_report_handler::set_actions(sc_core::SC_INFO, sc_core::SC_DO_NOTHING);
  SelfNotify one("one");
  std::vector<std::unique_ptr<Ticker>> many;
  for (int i = 0; i < modules; ++i)
    many.push_back(std::make_unique<Ticker>(sc_core::sc_gen_unique_name("t"), 1000 + 7 * static_cast<uint64_t>(i)));

  // Phase 1: one module notifying itself.
  g_fired = 0;
  g_limit = events;
  one.ev.notify(1, sc_core::SC_NS);
  double t0 = cpu_seconds();
  sc_core::sc_start();
  const uint64_t self_events = g_fired;
  const double self_s = cpu_seconds() - t0;

  // Phase 2: many modules, each with its own period.
  g_fired = 0;
  g_limit = events;
  for (auto& m : many) m->ev.notify(1, sc_core::SC_NS);
  t0 = cpu_seconds();
  sc_core::sc_start();
  const uint64_t many_events = g_fired;
  const double many_s = cpu_seconds() - t0;

  std::printf("{\"self_notify_events\": %llu, \"self_notify_s\": %.6f, \"self_notify_per_s\": %.0f, "
              "\"modules\": %d, \"many_events\": %llu, \"many_s\": %.6f, \"many_per_s\": %.0f}\n",
              static_cast<unsigned long long>(self_events), self_s, static_cast<double>(self_events) / self_s,
              modules, static_cast<unsigned long long>(many_events), many_s,
              static_cast<double>(many_events) / many_s);
  return 0;
}
