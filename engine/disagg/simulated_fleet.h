// SPDX-License-Identifier: MIT
/**
 * @file simulated_fleet.h
 * @brief Colocated and disaggregated serving on simulated instances: lab 06's
 *        simulated Engine, one per GPU, with the KV transfer between a prefill
 *        and a decode instance timed by a link.
 *
 * A colocated fleet is N independent engines that each prefill and decode
 * (lab 06's chunked prefill). A disaggregated fleet xPyD is x prefill
 * engines, whose requests want one token, and y decode engines, which take
 * each request once its KV has arrived (Engine::add_prefilled_request). The
 * router sends requests round robin, as `servelab router` does. Between the
 * two, each prefill instance has one outgoing link: its transfers queue on it
 * and each takes overhead + prompt_tokens · kv_bytes_per_token / rate. The
 * first token reaches the client with the KV (this lab's KV_READY), so TTFT
 * includes the transfer.
 *
 * Nothing flows back from decode to prefill, so the instances are simulated
 * one after the other: all prefills, then the transfers, then all decodes.
 * A decode instance that runs out of blocks preempts and recomputes, as any
 * engine does; with a GPU's worth of KV that is rare.
 *
 * The two pools may run on different GPUs (a heterogeneous fleet: prefill on
 * a compute-rich card, decode on a bandwidth-rich one), each pool with its
 * own cost model and its own KV budget (FleetConfig::prefill and FleetConfig::decode).
 */
#pragma once

#include <string>
#include <vector>

#include "core/stats.h"
#include "serve/engine.h"
#include "workload/workload.h"

namespace servelab::disagg {

/// How the simulated GPUs are split: one engine per GPU.
struct FleetShape {
  int num_prefill = 0;  ///< prefill instances; 0 = colocated
  int num_decode = 1;   ///< decode instances; when colocated, the instances that do both

  /// GPUs in all.
  int num_instances() const { return num_prefill + num_decode; }
  /// "colocated x2", "1P1D", "3P1D".
  std::string describe() const;
};

/// A simulated fleet's settings.
struct FleetConfig {
  FleetShape shape;                  ///< the split
  EngineConfig colocated;            ///< each colocated instance (lab 06: chunked prefill)
  EngineConfig prefill;              ///< each prefill instance; its requests want one token
  EngineConfig decode;               ///< each decode instance
  double link_bytes_per_second = 0;  ///< one prefill instance's outgoing link; 0 = the KV moves in no time
  double kv_bytes_per_token = 0;     ///< KV bytes a prompt token moves (2 · layers · kv_heads · head_dim · bytes)
  double transfer_overhead_s = 0;    ///< fixed seconds per transfer: control messages, posting descriptors
};

/// What a simulated fleet did with a workload.
struct FleetRun {
  std::vector<RequestTimes> times;       ///< per workload request, in workload order, on the simulated clock
  std::vector<double> transfer_seconds;  ///< per request, link queueing included; empty when colocated
};

/**
 * @brief Serves @p workload on the fleet @p config describes, every instance a
 *        simulated Engine on @p model's cost model.
 * @throws Error when the shape has no instance of a role it needs (num_decode
 *         < 1, num_prefill < 0), the link rate or bytes per token is negative,
 *         or an engine refuses a request (too long for its KV or context).
 */
FleetRun simulate_fleet(const SimulatedModel& model, const FleetConfig& config,
                        const std::vector<WorkloadRequest>& workload);

/**
 * @brief Serves @p workload on a heterogeneous xPyD fleet: the prefill
 *        instances on @p prefill_model's cost model, the decode instances on
 *        @p decode_model's (the same model shape on two kinds of GPU).
 *
 * A colocated shape has one kind of GPU: pass the same object twice.
 * @throws Error as simulate_fleet(), when the two models' shapes differ (the
 *         KV would not fit the other side's layout), or when a colocated shape
 *         is given two different models.
 */
FleetRun simulate_fleet(const SimulatedModel& prefill_model, const SimulatedModel& decode_model,
                        const FleetConfig& config, const std::vector<WorkloadRequest>& workload);

}  // namespace servelab::disagg
