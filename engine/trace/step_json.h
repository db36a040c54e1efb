// SPDX-License-Identifier: MIT
/**
 * @file step_json.h
 * @brief One step record as compact JSON: the shape the trace's step events
 *        carry in their args and the dashboard's event stream sends, so the
 *        page reads a saved trace and a live server with one parser.
 * @verbatim
 *  {"step":12,"t0":0.81,"t1":0.83,"sim":false,"prefill":256,"decode":4,
 *   "split":[schedule,forward,sample,update],      seconds (wall)
 *   "sched":[[id,tokens,"p"|"d"],...],  "pre":[[id,tokens_discarded],...],
 *   "first":[ids], "fin":[[id,"stop"|"length"|"abort"],...],
 *   "running":[ids], "waiting":[ids], "nb":blocks, "free":free blocks,
 *   "blocks":{"id":[block ids],...}, "freed":[ids]}   (freed only in a delta)
 * @endverbatim
 */
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "serve/step_observer.h"

namespace servelab {

/// Every request's block table as the previous step left it: request id -> block ids.
using BlockTables = std::map<int, std::vector<std::int32_t>>;

/**
 * @brief Appends @p record as JSON to @p out.
 * @param previous null: "blocks" holds every holder's table. Otherwise only the tables that
 *        changed since @p previous, and "freed" the requests that no longer hold any; @p previous
 *        is then updated to this step's tables.
 */
void append_step_json(std::string& out, const StepRecord& record, BlockTables* previous);

/// Appends @p event as JSON to @p out: {"ev":"add"|"abort","id":..,"t":..,"prompt":..,"max":..}.
void append_request_json(std::string& out, const RequestEvent& event);

/// Appends @p value with @p digits digits after the point (no exponent, never "nan").
void append_fixed(std::string& out, double value, int digits);

}  // namespace servelab
