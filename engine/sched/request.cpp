// SPDX-License-Identifier: MIT
#include "sched/request.h"

#include <algorithm>

namespace servelab {

const char* to_string(RequestStatus status) {
  switch (status) {
    case RequestStatus::WAITING: return "waiting";
    case RequestStatus::WAITING_FOR_REMOTE_KV: return "waiting_for_remote_kv";
    case RequestStatus::RUNNING: return "running";
    case RequestStatus::PREEMPTED: return "preempted";
    case RequestStatus::FINISHED: return "finished";
  }
  return "?";
}

const char* to_string(FinishReason reason) {
  switch (reason) {
    case FinishReason::NONE: return "";
    case FinishReason::STOP: return "stop";
    case FinishReason::LENGTH: return "length";
    case FinishReason::ABORT: return "abort";
  }
  return "?";
}

Request::Request(int id, std::span<const std::int32_t> prompt, const SamplingParams& sampling, int max_new,
                 std::vector<std::int32_t> stop_ids, double arrival)
    : request_id(id),
      max_tokens(max_new),
      stop_token_ids(std::move(stop_ids)),
      sampler(sampling),
      num_prompt_tokens_(static_cast<int>(prompt.size())),
      all_token_ids_(prompt.begin(), prompt.end()) {
  times.arrival = arrival;
}

void Request::append_output_token(std::int32_t token, double now) {
  all_token_ids_.push_back(token);
  times.token_times.push_back(now);
  if (std::find(stop_token_ids.begin(), stop_token_ids.end(), token) != stop_token_ids.end())
    finish(FinishReason::STOP, now);
  else if (num_output_tokens() >= max_tokens)
    finish(FinishReason::LENGTH, now);
}

void Request::finish(FinishReason reason, double now) {
  status = RequestStatus::FINISHED;
  finish_reason = reason;
  times.finished = now;
}

}  // namespace servelab
