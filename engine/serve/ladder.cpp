// SPDX-License-Identifier: MIT
#include "serve/ladder.h"

#include "core/error.h"

namespace servelab {

Techniques Techniques::for_lab(int lab) {
  check(lab >= 1 && lab <= 7, "no lab ", lab, " on the ladder (labs 1..7 exist)");
  Techniques t;                     // lab 01: the naive baseline
  if (lab >= 2) t.kv_cache = true;  // lab 02
  // lab 03 turns on no technique: it measures lab 02's configuration (counters, roofs, cost model)
  if (lab >= 4) t.paged_kv_cache = t.continuous_batching = true;
  if (lab >= 5) t.flash_attention = true;
  if (lab >= 6) t.chunked_prefill = true;
  if (lab >= 7) t.disaggregation = true;
  return t;
}

LabConfig configure(const Techniques& t, const LabConfig& base) {
  LabConfig c = base;
  c.engine.enable_kv_cache = t.kv_cache;
  check(t.paged_kv_cache || base.engine.max_model_len > 0,
        "configure: a contiguous KV layout reserves one block of max_model_len tokens per request, "
        "so base.engine.max_model_len must be set (got 0)");
  c.engine.block_size = t.paged_kv_cache ? base.engine.block_size : base.engine.max_model_len;
  c.engine.scheduler.policy = t.continuous_batching ? SchedulingPolicy::CONTINUOUS : SchedulingPolicy::ONE_AT_A_TIME;
  c.model.attention = t.flash_attention ? AttentionKind::FLASH : base.model.attention;
  c.engine.scheduler.enable_chunked_prefill = t.chunked_prefill;
  c.disaggregated = t.disaggregation;
  return c;
}

nlohmann::ordered_json to_json(const LabConfig& c) {
  const SchedulerConfig& s = c.engine.scheduler;
  const ModelOptions& m = c.model;
  return {{"engine",
           {{"scheduler",
             {{"policy", to_string(s.policy)},
              {"max_num_seqs", s.max_num_seqs},
              {"max_num_batched_tokens", s.max_num_batched_tokens},
              {"enable_chunked_prefill", s.enable_chunked_prefill},
              {"long_prefill_token_threshold", s.long_prefill_token_threshold},
              {"hold_finished_kv", s.hold_finished_kv}}},
            {"block_size", c.engine.block_size},
            {"kv_cache_memory", c.engine.kv_cache_memory},
            {"gpu_memory_utilization", c.engine.gpu_memory_utilization},
            {"num_gpu_blocks_override", c.engine.num_gpu_blocks_override},
            {"max_model_len", c.engine.max_model_len},
            {"enable_kv_cache", c.engine.enable_kv_cache}}},
          {"model",
           {{"backend", m.backend == Backend::CUDA ? "cuda" : "cpu"},
            {"num_threads", m.num_threads},
            {"weight_dtype", std::string(dtype_name(m.weight_dtype))},
            {"deterministic", m.deterministic},
            {"bf16_activations", m.bf16_activations},
            {"int8_activations", m.int8_activations},
            {"attention", to_string(m.attention)}}},
          {"disaggregated", c.disaggregated}};
}

namespace {

// The field at @p path of @p json, or an Error naming the path.
const nlohmann::json& field(const nlohmann::json& json, const std::string& path) {
  const nlohmann::json* at = &json;
  std::string::size_type start = 0;
  while (true) {
    const auto dot = path.find('.', start);
    const std::string key = path.substr(start, dot - start);
    check(at->is_object() && at->contains(key), "lab configuration: no field ", path);
    at = &(*at)[key];
    if (dot == std::string::npos) return *at;
    start = dot + 1;
  }
}

template <class T>
T get(const nlohmann::json& json, const std::string& path) {
  try {
    return field(json, path).get<T>();
  } catch (const nlohmann::json::exception& e) {
    fail("lab configuration: field ", path, " is malformed (", e.what(), ")");
  }
}

// Every leaf of @p json as (dotted path, value), in order.
void leaves(const nlohmann::ordered_json& json, const std::string& prefix,
            std::vector<std::pair<std::string, nlohmann::ordered_json>>& out) {
  if (!json.is_object()) {
    out.emplace_back(prefix, json);
    return;
  }
  for (const auto& [key, value] : json.items()) leaves(value, prefix.empty() ? key : prefix + "." + key, out);
}

}  // namespace

LabConfig lab_config_from_json(const nlohmann::json& j) {
  LabConfig c;
  SchedulerConfig& s = c.engine.scheduler;
  s.policy = parse_scheduling_policy(get<std::string>(j, "engine.scheduler.policy"), "engine.scheduler.policy");
  s.max_num_seqs = get<int>(j, "engine.scheduler.max_num_seqs");
  s.max_num_batched_tokens = get<int>(j, "engine.scheduler.max_num_batched_tokens");
  s.enable_chunked_prefill = get<bool>(j, "engine.scheduler.enable_chunked_prefill");
  s.long_prefill_token_threshold = get<int>(j, "engine.scheduler.long_prefill_token_threshold");
  s.hold_finished_kv = get<bool>(j, "engine.scheduler.hold_finished_kv");
  c.engine.block_size = get<int>(j, "engine.block_size");
  c.engine.kv_cache_memory = get<std::size_t>(j, "engine.kv_cache_memory");
  c.engine.gpu_memory_utilization = get<double>(j, "engine.gpu_memory_utilization");
  c.engine.num_gpu_blocks_override = get<int>(j, "engine.num_gpu_blocks_override");
  c.engine.max_model_len = get<int>(j, "engine.max_model_len");
  c.engine.enable_kv_cache = get<bool>(j, "engine.enable_kv_cache");
  ModelOptions& m = c.model;
  m.backend = parse_backend(get<std::string>(j, "model.backend"), "model.backend");
  m.num_threads = get<int>(j, "model.num_threads");
  m.weight_dtype = parse_dtype(get<std::string>(j, "model.weight_dtype"), "model.weight_dtype");
  m.deterministic = get<bool>(j, "model.deterministic");
  m.bf16_activations = get<bool>(j, "model.bf16_activations");
  m.int8_activations = get<bool>(j, "model.int8_activations");
  m.attention = parse_attention_kind(get<std::string>(j, "model.attention"), "model.attention");
  c.disaggregated = get<bool>(j, "disaggregated");
  return c;
}

std::vector<std::string> differences(const LabConfig& a, const LabConfig& b) {
  std::vector<std::pair<std::string, nlohmann::ordered_json>> la, lb;
  leaves(to_json(a), "", la);
  leaves(to_json(b), "", lb);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < la.size(); ++i)  // both have every field, in the same order
    if (la[i].second != lb[i].second) out.push_back(la[i].first);
  return out;
}

}  // namespace servelab
