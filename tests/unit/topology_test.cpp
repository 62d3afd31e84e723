// Torus coordinates, links and dimension-order routing.
#include <gtest/gtest.h>

#include "topology/torus.h"
#include "plan/mesh.h"

using namespace podsim;

TEST(TorusTest, CoordinatesRoundTripXFastest) {
  Torus t({4, 3, 2}, {true, true, true});
  EXPECT_EQ(t.chips(), 24);
  EXPECT_EQ(t.coords(5), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(t.chip({3, 2, 1}), 23);
  for (int64_t c = 0; c < t.chips(); ++c) EXPECT_EQ(t.chip(t.coords(c)), c);
}

TEST(TorusTest, WrapLinksAndOpenEdges) {
  Torus ring({8, 1}, {true, true});
  EXPECT_EQ(ring.neighbor(7, Torus::direction(0, true)), 0);
  EXPECT_EQ(ring.neighbor(0, Torus::direction(0, false)), 7);
  EXPECT_EQ(ring.neighbor(0, Torus::direction(1, true)), -1);  // a dimension of one chip has no links
  Torus line({8, 1}, {false, true});
  EXPECT_EQ(line.neighbor(7, Torus::direction(0, true)), -1);
  EXPECT_EQ(line.neighbor(0, Torus::direction(0, false)), -1);
  EXPECT_EQ(line.neighbor(3, Torus::direction(0, true)), 4);
}

TEST(TorusTest, ShorterWayAroundTheRing) {
  Torus t({8, 8}, {true, true});
  EXPECT_EQ(t.hops(0, 7), 1);   // wrap-around
  EXPECT_EQ(t.hops(0, 3), 3);
  EXPECT_EQ(t.hops(0, 5), 3);
  EXPECT_EQ(t.hops(0, 4), 4);   // half-way: either way
  EXPECT_EQ(t.hops(0, 63), 2);  // (7, 7): one hop each way round x and y
  EXPECT_EQ(t.next_hop(0, 7), Torus::direction(0, false));
  Torus open({8, 8}, {false, false});
  EXPECT_EQ(open.hops(0, 7), 7);
  EXPECT_EQ(open.hops(0, 63), 14);
}

TEST(TorusTest, DimensionOrderRoutesXFirst) {
  Torus t({4, 4}, {true, true});
  int64_t at = t.chip({0, 0});
  int64_t dst = t.chip({1, 1});
  EXPECT_EQ(t.next_hop(at, dst), Torus::direction(0, true));
  at = t.neighbor(at, t.next_hop(at, dst));
  EXPECT_EQ(t.coords(at), (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(t.next_hop(at, dst), Torus::direction(1, true));
}

TEST(TorusTest, HalfwayTiesAlternateByParity) {
  Torus t({4, 1}, {true, true});
  EXPECT_EQ(t.next_hop(0, 2), Torus::direction(0, true));   // even coordinate: + way
  EXPECT_EQ(t.next_hop(1, 3), Torus::direction(0, false));  // odd coordinate: - way
}

TEST(TorusTest, Labels) {
  Torus t({4, 4, 4}, {true, true, true});
  EXPECT_EQ(t.chip_label(21), "chip 21 (x=1,y=1,z=1)");
  EXPECT_EQ(Torus::direction_name(5), "-z");
}

TEST(TorusTest, ShiftTranslatesAlongOneDimensionWithWrap) {
  Torus t({4, 8}, {true, true});
  // chip 13 is (x=1, y=3)
  EXPECT_EQ(t.shift(13, 0, 2), 15);   // (3, 3)
  EXPECT_EQ(t.shift(13, 0, 3), 12);   // (0, 3): wraps
  EXPECT_EQ(t.shift(13, 1, -4), 29);  // (1, 7): wraps backwards
  EXPECT_EQ(t.shift(13, 1, 8), 13);   // a whole ring
}

TEST(MeshTest, GroupRankOfAChipInvertsChipOf) {
  Torus t({8, 4}, {true, true});
  Mesh m = Mesh::layout({"data", "model"}, {8, 4}, t, {});  // model x:4; data x:2 every 4, y:4
  for (int64_t c = 0; c < t.chips(); ++c)
    for (const auto& axes : std::vector<std::vector<std::string>>{{"data"}, {"model"}, {}}) {
      MeshGroup g = m.group(c, axes);
      EXPECT_EQ(g.rank_of(c, t), g.rank);
      for (int64_t r = 0; r < g.shape.size(); ++r) EXPECT_EQ(g.rank_of(g.chip_of(r, t), t), r);
    }
}

TEST(MeshTest, ContiguousAxisTakesNeighbouringChips) {
  Torus t({32, 32}, {true, true});
  // Without the hint `pipe`, outermost, takes what is left of y after data: every 4th chip.
  Mesh plain = Mesh::layout({"pipe", "data", "model"}, {8, 16, 8}, t, {});
  EXPECT_EQ(plain.axis(0).factors.front().stride, 4);
  // With it, a run of 8 neighbouring chips along y, and data the rest.
  Mesh m = Mesh::layout({"pipe", "data", "model"}, {8, 16, 8}, t, {}, {"pipe"});
  ASSERT_EQ(m.axis(0).factors.size(), 1u);
  EXPECT_EQ(m.axis(0).factors[0].dim, 1);
  EXPECT_EQ(m.axis(0).factors[0].size, 8);
  EXPECT_EQ(m.axis(0).factors[0].stride, 1);
  EXPECT_EQ(m.describe(), "pipe 8 (y:8) x data 16 (x:4 every 8, y:4 every 8) x model 8 (x:8)");
  // Consecutive stages are one hop apart, for every chip.
  for (int64_t c = 0; c < t.chips(); ++c) {
    MeshGroup g = m.group(c, {"pipe"});
    if (g.rank + 1 < g.shape.size()) {
      EXPECT_EQ(t.hops(c, g.chip_of(g.rank + 1, t)), 1) << c;
    }
  }
  // An explicit placement anywhere leaves the layout to the user.
  Mesh placed = Mesh::layout({"pipe", "data", "model"}, {8, 16, 8}, t, {"", "", "x:8"}, {"pipe"});
  EXPECT_EQ(placed.axis(0).factors.front().stride, 4);
  // No dimension holds the axis whole: placed like the others.
  Mesh small = Mesh::layout({"pipe", "data"}, {8, 2}, Torus({4, 4}, {true, true}), {}, {"pipe"});
  EXPECT_EQ(small.axis(0).size, 8);
}
