// Byte-fair turns on a shared link (hw/chip/link_turns.h), by hand: flows of unequal messages get equal bytes over
// a window, flows of messages of at most a chunk send one message per turn in order, ties go by turn order, and a
// turn never sends more than one message.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "hw/chip/link_turns.h"

using namespace podsim;

namespace {

// A flow that always has messages waiting: its front message is the next of `sizes`, cycled.
struct Flow {
  std::vector<double> sizes;
  size_t sent = 0;
  double credit = 0;
  double bytes = 0;  // sent so far
  double front() const { return sizes[sent % sizes.size()]; }
};

// Sends `n` messages from `flows` as the link injector does: each send goes to fair_turn's winner, and the next
// round starts at the flow after it. Returns the order of the senders (flow indices as letters).
std::string run(std::vector<Flow>& flows, double chunk, int n) {
  std::string order;
  size_t next = 0;
  for (int i = 0; i < n; ++i) {
    auto w = fair_turn(flows.begin(), flows.end(), flows.begin() + static_cast<long>(next), chunk,
                       [](const Flow& f) { return f.front(); });
    w->bytes += w->front();
    ++w->sent;
    const size_t k = static_cast<size_t>(w - flows.begin());
    order += static_cast<char>('A' + k);
    next = (k + 1) % flows.size();
  }
  return order;
}

}  // namespace

// A flow of 8-chunk messages (A) and one of 1-chunk messages (B), A's turn first: A collects a turn each time
// round and sends on the eighth; B sends on each of its own turns. So after A's message B sends once on its turn,
// then seven times more while A collects turns 1 to 7, then A: 8 B messages per A message, 800 bytes each per
// cycle of 9 sends.
TEST(LinkTurnsTest, FlowsOfUnequalMessagesGetEqualBytes) {
  std::vector<Flow> flows = {{{800}}, {{100}}};
  EXPECT_EQ(run(flows, 100, 18), "BBBBBBBABBBBBBBBAB");
  EXPECT_EQ(flows[0].credit, 0);  // A just sent; B's turn came next and A's has not come round yet
  // 900 more sends: 100 cycles of 8 B and 1 A from where the window started (A's turn next, A holding no turn).
  for (Flow& f : flows) f.bytes = 0;
  run(flows, 100, 900);
  EXPECT_EQ(flows[0].bytes, 100 * 800);
  EXPECT_EQ(flows[1].bytes, 100 * 800);
}

// A message of 1.25 chunks needs 1.25 turns on average: what its second turn does not use stays as credit
// (75, 50, 25, 0), so A sends four messages in five turns and B five: 500 bytes each per cycle of 9.
TEST(LinkTurnsTest, PartOfATurnAMessageDoesNotUseIsKept) {
  std::vector<Flow> flows = {{{125}}, {{100}}};
  EXPECT_EQ(run(flows, 100, 9), "BABABABAB");
  EXPECT_EQ(flows[0].bytes, 500);
  EXPECT_EQ(flows[1].bytes, 500);
  EXPECT_EQ(run(flows, 100, 9), "BABABABAB");  // the same cycle again: no credit carried over it
}

// Messages of at most a chunk, whatever their size: one message per turn, in turn order, no credit kept (the
// injector's arbitration before byte-fair turns).
TEST(LinkTurnsTest, MessagesOfAtMostAChunkGoOnePerTurn) {
  std::vector<Flow> flows = {{{100}}, {{30, 100}}, {{0}}};
  EXPECT_EQ(run(flows, 100, 9), "ABCABCABC");
  for (const Flow& f : flows) EXPECT_EQ(f.credit, 0);
  EXPECT_EQ(flows[1].bytes, 30 + 100 + 30);
}

// Three flows of 3-chunk messages: all need three turns, so the flow whose turn it is sends, and the two after it
// took two turns each; they send on their next turn. From B's turn: B, C, A, B, ...
TEST(LinkTurnsTest, EqualNeedsGoInTurnOrder) {
  std::vector<Flow> flows = {{{300}}, {{300}}, {{300}}};
  auto w = fair_turn(flows.begin(), flows.end(), flows.begin() + 1, 100.0, [](const Flow& f) { return f.front(); });
  EXPECT_EQ(w - flows.begin(), 1);
  EXPECT_EQ(flows[0].credit, 200);
  EXPECT_EQ(flows[1].credit, 0);
  EXPECT_EQ(flows[2].credit, 200);
  // The last flow's turn, and the winner before it in the vector (the order wraps): A (2 turns needed) before
  // B (3); C, already past, took one turn fewer than A.
  std::vector<Flow> g = {{{200}}, {{300}}, {{500}}};
  w = fair_turn(g.begin(), g.end(), g.begin() + 2, 100.0, [](const Flow& f) { return f.front(); });
  EXPECT_EQ(w - g.begin(), 0);
  EXPECT_EQ(g[0].credit, 0);    // 2 turns of 100 for 200 bytes
  EXPECT_EQ(g[1].credit, 100);  // after A in turn order: one turn
  EXPECT_EQ(g[2].credit, 200);  // C's turn came first: two turns
}

// However many turns the messages need, one call picks one sender in one pass: a flow of 1000-chunk messages
// against one of 1-chunk messages sends once per 1000 of the other's.
TEST(LinkTurnsTest, ManyTurnsCostOnePass) {
  std::vector<Flow> flows = {{{1e5}}, {{100}}};
  const std::string order = run(flows, 100, 2002);
  EXPECT_EQ(flows[0].sent, 2u);
  EXPECT_EQ(flows[1].sent, 2000u);
  EXPECT_EQ(order.find('A'), 999u);  // A's first message after 999 of B's
}
