// The data-center network (DCN) between slices (hardware.slices; Cloud TPU Multislice). Chips of different slices
// never talk directly: a chip hands its data to its host, the host sends it through its NICs over the network to
// the peer chip's host, which hands it to the peer chip. So a message for another slice
//
//   1. crosses the sender's host link to its host's memory (hw/chip/host_link.h: shared with the chip's other host
//      transfers, chunk by chunk; the DMA reads it from HBM as it goes),
//   2. leaves through the host's NICs (hardware.dcn.bandwidth per host and direction, shared by the host's chips in
//      arrival order),
//   3. crosses the network (hardware.dcn.latency; with hardware.dcn.oversubscription f > 1 it also passes its slice's
//      way out and the peer slice's way in, each carrying a slice's NIC total / f; non-blocking otherwise),
//   4. enters the peer host through its NICs (shared by everything arriving there, in arrival order),
//   5. crosses the peer chip's host link from host memory, and is landed by the chip's DMA engines (written to HBM,
//      or added on its vector units) as an ICI arrival would be.
// Host memory is store-and-forward (a chunk reaches it whole before it goes on); the NICs and the network are
// cut-through, as ICI links are: a stage starts a message when its head arrives and ends it no earlier than its
// tail. Collectives cut what crosses the DCN into hardware.dcn.chunk pieces (Megascale's reduction shard size), so a
// lone chunk of c bytes from one chip to another takes
//
//   c / host_link + host_latency + c / nic + dcn_latency + c / host_link + host_latency  (+ the HBM write on landing)
//
// Where a pod is reduced to one box of chips (hw/pod/symmetry.h), a message for a chip outside it enters the box
// chip that stands for that chip, moved back by the translation, as a shifted ICI link does; the box then holds
// whole hosts (and whole slices when the network is oversubscribed), so every NIC carries what it would.
//
// Messages that reach a NIC at one instant are taken in the order of keys that depend only on the chips' relative
// positions (hw/chip/action_queue.h), so the box and the whole pod see the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "hw/chip/action_queue.h"
#include "hw/chip/chip_log.h"
#include "hw/chip/host_link.h"
#include "hw/ici/message.h"
#include "hw/pod/pod_context.h"
#include "topology/hosts.h"

namespace podsim {

class DcnNetwork;

// A chip's way onto the DCN: the sending and receiving ends of its messages for other slices.
class DcnPort {
 public:
  using Deliver = std::function<void(Message&&)>;            // to the chip's DMA engines, once it has landed
  using Injected = std::function<void(int32_t op, int32_t task)>;  // the message has left the chip

  DcnPort(int64_t chip, DcnNetwork& net, HostLink& host_link, ChipLog& log, Deliver deliver);

  // Sends `m` (its data in HBM now; read_hbm false: still on chip, as a forwarded ring chunk) to its slice.
  void send(Message&& m, bool read_hbm, const Injected& injected);
  // A message from another slice has reached this chip's host: over the host link, then to the DMA engines.
  void receive(Message&& m);
  int64_t chip() const { return m_chip; }

 private:
  int64_t m_chip;
  DcnNetwork& m_net;
  HostLink& m_host_link;
  ChipLog& m_log;
  Deliver m_deliver;
};

class DcnNetwork {
 public:
  // `representative` gives the simulated chip that stands for each chip (itself without symmetry).
  DcnNetwork(PodContext& ctx, std::function<int64_t(int64_t)> representative);

  // The port of a simulated chip, which the chip registers.
  void attach(DcnPort* port) { m_ports[static_cast<size_t>(port->chip())] = port; }
  const HostMap& hosts() const { return m_hosts; }
  MessagePool& pool() { return m_ctx.messages; }

  // A message from chip `from` is in its host's memory now: out through the host's NICs toward its slice.
  void from_host(int64_t from, Message&& m);

  // Statistics per host (host ids as topology/hosts.h numbers them): bytes and busy seconds each way.
  struct HostStats {
    double bytes_out = 0, bytes_in = 0;
    double busy_out = 0, busy_in = 0;
  };
  const std::vector<HostStats>& host_stats() const { return m_stats; }

 private:
  // A cut-through stage: busy until `free`; a message starts when its head arrives and the stage is free, and
  // ends no earlier than its tail (and its serialisation).
  struct Stage {
    double free = 0;
  };
  // Passes the message in `slot`, whose head arrives now and whose tail arrives at its `tail`, through `s` at `bw`;
  // returns when its head started, and sets its tail to when the tail leaves. `busy` collects the busy time.
  double pass(Stage& s, uint32_t slot, double bw, double* busy);
  void egress(uint32_t slot);     // 2: the sender's NICs
  void slice_out(uint32_t slot);  // 3: the sending slice's way out (oversubscribed)
  void slice_in(uint32_t slot);   //    and the receiving slice's way in
  void ingress(uint32_t slot);    // 4: the receiver's NICs
  // Schedules `stage` for the message in `slot` at `at`, as an arrival keyed by its chips.
  void arrive(double at, uint32_t slot, int64_t at_chip, void (DcnNetwork::*stage)(uint32_t));
  // The key of an arrival at a stage for chip `at` from chip `from` (translation invariant, unique per pair).
  uint64_t key(int64_t at, int64_t from) const;
  // Moves a message headed outside the simulated box onto the chip that stands for its destination.
  void enter_box(Message& m) const;

  PodContext& m_ctx;
  const Torus& m_torus;
  HostMap m_hosts;
  DcnConfig m_cfg;
  double m_slice_bw = 0;              // each slice's way out and in (oversubscribed), bytes/s
  std::function<int64_t(int64_t)> m_rep;
  std::vector<DcnPort*> m_ports;      // per chip; null for chips outside the simulated box
  std::vector<Stage> m_out, m_in;     // per host: the NICs each way
  std::vector<Stage> m_slice_out, m_slice_in;  // per slice, when oversubscribed
  std::vector<HostStats> m_stats;
  ActionQueue m_queue;
};

}  // namespace podsim
