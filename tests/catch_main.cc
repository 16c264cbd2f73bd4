// tests/catch_main.cc — the one Catch2 main every Catch2 test executable links
// (the htr_catch_main static library of tests/meson.build). Catch2 v2's
// implementation is compiled here once instead of once per executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
