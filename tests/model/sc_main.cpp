// SystemC test binaries define sc_main (libsystemc provides main); ctest runs each TEST in its own process.
#include <gtest/gtest.h>
#include <systemc>

int sc_main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
