// Torus coordinates, links and dimension-order routing.
#include <gtest/gtest.h>

#include "hw/topology/torus.h"

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
