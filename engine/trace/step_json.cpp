// SPDX-License-Identifier: MIT
#include "trace/step_json.h"

#include <charconv>
#include <cmath>

namespace servelab {

namespace {

void append_int(std::string& out, long value) { out += std::to_string(value); }

void append_ids(std::string& out, const std::vector<int>& ids) {
  out += '[';
  for (std::size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    append_int(out, ids[i]);
  }
  out += ']';
}

void append_table(std::string& out, int id, const std::vector<std::int32_t>& blocks) {
  out += '"';
  append_int(out, id);
  out += "\":[";
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    if (i) out += ',';
    append_int(out, blocks[i]);
  }
  out += ']';
}

const char* reason_name(FinishReason r) {
  return r == FinishReason::STOP ? "stop" : r == FinishReason::LENGTH ? "length" : "abort";
}

}  // namespace

void append_fixed(std::string& out, double value, int digits) {
  if (!std::isfinite(value)) value = 0;
  char buf[64];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::fixed, digits);
  out.append(buf, ec == std::errc{} ? end : buf);
}

void append_step_json(std::string& out, const StepRecord& r, BlockTables* previous) {
  out += "{\"step\":";
  append_int(out, r.step);
  out += ",\"t0\":";
  append_fixed(out, r.start, 7);
  out += ",\"t1\":";
  append_fixed(out, r.end, 7);
  out += r.simulated ? ",\"sim\":true" : ",\"sim\":false";
  out += ",\"prefill\":";
  append_int(out, r.num_prefill_tokens);
  out += ",\"decode\":";
  append_int(out, r.num_decode_tokens);
  out += ",\"split\":[";
  const double split[] = {r.schedule_seconds, r.forward_seconds, r.sample_seconds, r.update_seconds};
  for (int i = 0; i < 4; ++i) {
    if (i) out += ',';
    append_fixed(out, split[i], 7);
  }
  out += "],\"sched\":[";
  for (std::size_t i = 0; i < r.scheduled.size(); ++i) {
    const StepShare& s = r.scheduled[i];
    if (i) out += ',';
    out += '[';
    append_int(out, s.request_id);
    out += ',';
    append_int(out, s.num_new_tokens);
    out += s.decode ? ",\"d\"]" : ",\"p\"]";
  }
  out += "],\"pre\":[";
  for (std::size_t i = 0; i < r.preempted.size(); ++i) {
    if (i) out += ',';
    out += '[';
    append_int(out, r.preempted[i].request_id);
    out += ',';
    append_int(out, r.preempted[i].tokens_discarded);
    out += ']';
  }
  out += "],\"first\":";
  append_ids(out, r.first_token);
  out += ",\"fin\":[";
  for (std::size_t i = 0; i < r.finished.size(); ++i) {
    if (i) out += ',';
    out += '[';
    append_int(out, r.finished[i]);
    out += ",\"";
    out += reason_name(r.finish_reasons[i]);
    out += "\"]";
  }
  out += "],\"running\":";
  append_ids(out, r.running);
  out += ",\"waiting\":";
  append_ids(out, r.waiting);
  out += ",\"nb\":";
  append_int(out, r.num_blocks);
  out += ",\"free\":";
  append_int(out, r.num_free_blocks);
  out += ",\"blocks\":{";
  bool first = true;
  for (const BlockOwner& b : r.blocks) {
    if (previous) {
      const auto it = previous->find(b.request_id);
      if (it != previous->end() && it->second == b.block_ids) continue;
    }
    if (!first) out += ',';
    first = false;
    append_table(out, b.request_id, b.block_ids);
  }
  out += '}';
  if (previous) {
    // Holders are sorted by id, as the map is: one merge finds who let go of their blocks.
    std::vector<int> freed;
    auto holder = r.blocks.begin();
    for (const auto& [id, blocks] : *previous) {
      while (holder != r.blocks.end() && holder->request_id < id) ++holder;
      if (holder == r.blocks.end() || holder->request_id != id) freed.push_back(id);
    }
    out += ",\"freed\":";
    append_ids(out, freed);
    // Updated in place: a big pool with few changes per step costs a comparison per table, not a copy.
    for (int id : freed) previous->erase(id);
    for (const BlockOwner& b : r.blocks) {
      std::vector<std::int32_t>& held = (*previous)[b.request_id];
      if (held != b.block_ids) held = b.block_ids;
    }
  }
  out += '}';
}

void append_request_json(std::string& out, const RequestEvent& e) {
  out += e.kind == RequestEvent::Kind::ADDED ? "{\"ev\":\"add\",\"id\":" : "{\"ev\":\"abort\",\"id\":";
  append_int(out, e.request_id);
  out += ",\"t\":";
  append_fixed(out, e.time, 7);
  out += ",\"prompt\":";
  append_int(out, e.num_prompt_tokens);
  out += ",\"max\":";
  append_int(out, e.max_tokens);
  out += '}';
}

}  // namespace servelab
