// Catch2 main of memory_pool_tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
