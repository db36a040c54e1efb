// Catch2 v2 supplies main() for the engine test executable.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
