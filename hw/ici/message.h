// A transfer over ICI: one chunk of a collective step, a point-to-point send, or a synthetic-traffic packet.
// Routed hop by hop (cut-through: the head moves on after the hop latency while the tail is still serialising).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace podsim {

// What a message carries: a chunk of a collective, a chunk of a point-to-point Send, the acknowledgement that a
// Send's data has all landed (no payload), or a synthetic-traffic packet.
enum class MsgKind : uint8_t { Collective, PointToPoint, Ack, Traffic };

// Identifies which receive a message is for. Collectives: the collective instance (a hash of the op's name), the
// sender chip and the schedule's tag. Point to point and acknowledgements: the count of earlier transfers with the
// same (sender chip, receiver chip, tag), the sender chip and the tag. `src` is always a chip, so a translation of
// the torus (hw/pod/symmetry.h) moves a message by moving its src and dst.
struct MsgKey {
  uint64_t instance = 0;
  int64_t src = 0;
  int64_t tag = 0;
  bool operator==(const MsgKey& o) const { return instance == o.instance && src == o.src && tag == o.tag; }
};

struct MsgKeyHash {
  size_t operator()(const MsgKey& k) const {
    uint64_t h = k.instance * 0x9e3779b97f4a7c15ull;
    h ^= static_cast<uint64_t>(k.src) + 0x517cc1b727220a95ull + (h << 6) + (h >> 2);
    h ^= static_cast<uint64_t>(k.tag) + 0x2545f4914f6cdd1dull + (h << 6) + (h >> 2);
    return static_cast<size_t>(h);
  }
};

struct Message {
  MsgKind kind = MsgKind::Collective;
  int64_t src = -1, dst = -1;  // chips
  double bytes = 0;
  MsgKey key;
  int64_t offset = 0;  // point to point: the chunk's first element within the transfer
  std::shared_ptr<const std::vector<float>> payload;  // numeric mode
  double created = 0;  // when the sender's DMA started it
  double tail = 0;     // when its tail reaches the current router
  int32_t op = -1;     // the sender's exec op (for traces)
  uint64_t flow = 0;   // trace flow id
  uint32_t hops = 0;
  // A detour around a down link (hw/ici/router.h): the direction the message keeps along the detour's dimension
  // until its coordinate there is the destination's; -1 when it follows dimension-order routing.
  int8_t detour = -1;
  // Bookkeeping of the chip handling the message now: the op and task its injection (sender) or landing
  // (receiver) completes; -1 when none.
  int32_t op_here = -1;
  int32_t task_here = -1;
};

// Messages in flight live here, so the actions that move them carry a slot number instead of an allocation.
// One pool per simulation (messages travel between chips); the simulation is single-threaded.
class MessagePool {
 public:
  uint32_t put(Message&& m) {
    if (m_free.empty()) {
      m_slots.push_back(std::move(m));
      return static_cast<uint32_t>(m_slots.size() - 1);
    }
    uint32_t s = m_free.back();
    m_free.pop_back();
    m_slots[s] = std::move(m);
    return s;
  }
  Message& at(uint32_t s) { return m_slots[s]; }
  Message take(uint32_t s) {
    Message m = std::move(m_slots[s]);
    m_slots[s].payload.reset();
    m_free.push_back(s);
    return m;
  }
  size_t in_flight() const { return m_slots.size() - m_free.size(); }

 private:
  std::vector<Message> m_slots;
  std::vector<uint32_t> m_free;
};

}  // namespace podsim
