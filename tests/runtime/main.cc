// tests/runtime/main.cc — Catch2 main of the runtime test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
