// SPDX-License-Identifier: MIT
/**
 * @file lab02.h
 * @brief Lab 02's memory tables (memory.cpp): what the KV cache costs in
 *        bytes, by the formula and as the engine allocates it. main.cpp
 *        times generation with the cache off and on, counts the work it
 *        removes and prints the verdict.
 * @see labs/02_kv_cache/README.md
 */
#pragma once

#include "lab.h"
#include "perf/hardware.h"

namespace servelab::lab02 {

using lab::Table;

/// 3. KV memory: the formula for the published models and their MHA/GQA/MQA variants: what GQA saves, and the
///    prefill/decode article's 270 MB and 670 MB checked.
Table kv_memory_table();

/// 4. The formula against what the engine's cache really allocates (f32 cache, sizes this machine can hold), one
///    row per case with "equal" yes or no. @p cases counts the cases checked.
Table kv_allocated_table(bool quick, int& cases);

/// 5. GPU memory = weights + KV + activations + runtime on @p card, for every model preset in bf16: how many
///    requests of 2,048 and 8,192 tokens the KV room left after the rest holds.
Table gpu_memory_table(const Hardware& card);

}  // namespace servelab::lab02
