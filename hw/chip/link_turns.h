// Byte-fair turns between the flows that share one outgoing link (hw/chip/link_injector.h): the flows of the best
// priority take turns in round robin, one turn worth one chunk (hardware.ici.chunk), and a flow's front message goes
// when the flow has collected the turns its bytes need. A message of at most one chunk needs one turn, so where
// every message is at most a chunk the flows send one message per turn each, in order. A message of b > chunk
// bytes needs b / chunk turns: a flow whose front message has not yet collected them lets the next flow go and keeps
// the turn as credit (a deficit round robin with a quantum of one chunk that sends at most one message per turn),
// so a flow cut into larger messages (hardware.ici.max_chunks) gets the same bytes of a shared link as one of
// chunk-sized messages, instead of a message per turn.
//
// Credit is kept only while a flow has messages waiting. What a large message's last turn does not use (less than
// a chunk) stays with the flow; a message of at most a chunk leaves none, so credit is below one chunk after every
// send, and while a flow waits it holds less than its front message.
//
//   It f = fair_turn(begin, end, first, chunk, [](const Flow& f) { return bytes of f's front message; });
#pragma once

#include <algorithm>
#include <cmath>

namespace podsim {

// Turns a flow holding `credit` needs before its front message of `bytes` may go: at least the present one.
inline double turns_needed(double bytes, double credit, double chunk) {
  const double rest = bytes - credit;
  return rest <= chunk ? 1.0 : std::ceil(rest / chunk);
}

// The flows [begin, end) (each with a `double credit`) take turns from `first` (the flow whose turn it is, in
// [begin, end)), going round from end back to begin. Returns the flow whose front message goes now: the first in
// that order to have collected its turns. Every flow up to it in that order took as many turns as it did, every
// flow after it one fewer; their credit grows by those turns, the winner's by its turns less the message's bytes.
// Costs one look at `first` when its front message is at most its credit plus a chunk (always, where no message is
// larger than a chunk), else one pass over the flows; it does not depend on how many turns pass.
template <class It, class Bytes>
It fair_turn(It begin, It end, It first, double chunk, const Bytes& bytes_of) {
  double bytes = bytes_of(*first);
  double turns = turns_needed(bytes, first->credit, chunk);
  It winner = first;
  if (turns > 1) {
    for (It f = first + 1; f != end && turns > 1; ++f) {
      const double t = turns_needed(bytes_of(*f), f->credit, chunk);
      if (t < turns) turns = t, winner = f;  // strictly fewer: on a tie the earlier in turn order wins
    }
    for (It f = begin; f != first && turns > 1; ++f) {
      const double t = turns_needed(bytes_of(*f), f->credit, chunk);
      if (t < turns) turns = t, winner = f;
    }
    bytes = bytes_of(*winner);
    // In turn order the flows from `first` to the winner took `turns` turns, the ones after it `turns - 1`.
    const bool wraps = winner < first;
    for (It f = begin; f != end; ++f) {
      if (f == winner) continue;
      const bool before = wraps ? (f >= first || f < winner) : (f >= first && f < winner);
      f->credit += (before ? turns : turns - 1) * chunk;
    }
  }
  winner->credit = bytes > chunk ? std::max(0.0, winner->credit + turns * chunk - bytes) : 0.0;
  return winner;
}

}  // namespace podsim
