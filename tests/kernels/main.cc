// Catch2 main of the kernel tests.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
