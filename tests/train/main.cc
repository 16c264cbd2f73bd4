// Catch2 main for the train suite's C++ tests (checkpoint I/O).
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
