// SPDX-License-Identifier: MIT
#include "disagg/decode_role.h"

#include <algorithm>
#include <limits>

#include "core/error.h"
#include "core/timer.h"
#include "disagg/kv_transfer_plan.h"

namespace servelab::disagg {

void DecodeRole::alloc(const Message& m) {
  // A second ALLOC for a request that holds blocks here would take blocks that nothing frees.
  take_on(c_, m, "alloc", "which holds blocks here already", [&](std::int64_t req) {
    const std::vector<std::int32_t> prompt = field_ids(m, "prompt", c_.vocab_size - 1);
    const int max_tokens = static_cast<int>(field_int(m, "max_tokens", 1, std::numeric_limits<std::int32_t>::max()));
    const RequestSampling sampling = sampling_from(m, c_.vocab_size);
    // Throws, and the router fails the request with the reason, when it could never fit.
    const std::optional<int> id =
        c_.engine.add_remote_request(prompt, sampling.params, max_tokens, sampling.stop_token_ids);
    if (!id) {
      const KVCacheManager& kv = c_.engine.kv_cache_manager();
      c_.send({{"type", "full"},
               {"req", req},
               {"reason", "decode worker has " + std::to_string(kv.block_pool().num_free_blocks()) +
                              " free KV blocks, the prompt needs " +
                              std::to_string(kv.num_blocks_for(static_cast<long>(prompt.size())))}});
      return;
    }
    jobs_.emplace(*id, DecodeJob{.req = req, .deadline = now_seconds() + c_.config.kv_timeout});
    c_.send({{"type", "allocated"}, {"req", req}, {"blocks", c_.blocks_of(*id)}});
  });
}

void DecodeRole::prefill_locally(const Message& m) {
  const std::int64_t req = field_req(m);
  const auto it = find(req);
  if (it == jobs_.end())
    return c_.report_failure(req, "this worker holds no blocks for the request (no ALLOC, or freed)");
  c_.engine.compute_prompt_locally(it->first);
  it->second.local = true;
}

void DecodeRole::kv(const Message& m, bool ready) {
  const auto it = find(field_req(m));
  if (it == jobs_.end() || it->second.local) return;  // freed already (timeout or abort), or our own relayed back
  const int id = it->first;
  if (c_.engine.request(id).status != RequestStatus::WAITING_FOR_REMOTE_KV)
    return c_.dropped("KV for request " + std::to_string(it->second.req) + ", which is not waiting for its KV");
  DecodeJob& job = it->second;
  try {
    receive(m, ready, id, job);
    if (!ready) return;
    check(!m.contains("accounting") || m["accounting"].is_object(), "kv_ready: field 'accounting' must be an object");
    job.accounting = m.value("accounting", Message::object());
    if (c_.config.mode == TransferMode::READ) {
      const double seconds = job.read_seconds;
      job.accounting["transfer_ms"] = seconds * 1e3;
      job.accounting["gb_per_s"] = job.accounting.value("bytes", 0.0) / seconds / 1e9;
      job.accounting["transfer_over_prefill"] = seconds * 1e3 / job.accounting.value("prefill_ms", 1.0);
    }
    const std::string dst = c_.checksum(id, c_.engine.request(id).num_prompt_tokens());
    job.accounting["dst_checksum"] = dst;
    const std::string src = job.accounting.value("src_checksum", std::string("missing"));
    check(dst == src, "KV checksum mismatch after the transfer (source ", src, ", destination ", dst, ")");
    c_.engine.kv_arrived(id, static_cast<std::int32_t>(field_int(m, "first_token", 0, c_.vocab_size - 1)),
                         c_.engine.now());
    if (c_.engine.request(id).is_finished()) finish(id);  // the first token was its last
  } catch (const Error& e) {
    c_.report_failure(job.req, e.what());
    drop(id);
  }
}

void DecodeRole::receive(const Message& m, bool ready, int id, DecodeJob& job) {
  const Peer& prefill = c_.peer(field_worker(m, "prefill_worker"));
  const std::vector<std::int32_t> src = field_ids(m, "src_blocks", prefill.layout.num_blocks - 1);
  const TransferPlan plan = plan_transfer(c_.layout, c_.blocks_of(id), prefill.layout, src,
                                          c_.engine.request(id).num_prompt_tokens(), 0, c_.layout.num_layers);
  if (!ready) {  // SEND: post the receives the prefill worker's sends are waiting for
    c_.transport.recv(kv_send_tag(job.req), plan.descriptors, c_.transfer_options());
  } else if (c_.config.mode == TransferMode::READ) {
    const double t0 = now_seconds();
    c_.transport.read(prefill.handle, plan.descriptors, c_.transfer_options());
    job.read_seconds = now_seconds() - t0;
    c_.send({{"type", "read_done"}, {"req", job.req}});
  }
}

void DecodeRole::on_token(const RequestOutput& out, double step_start, double step_end) {
  DecodeJob& job = jobs_.at(out.request_id);
  const Request& r = c_.engine.request(out.request_id);
  if (job.local && r.num_output_tokens() == 1) {
    // Role both: this step was the prefill; report it as a prefill worker would, with nothing moved.
    const int n = r.num_prompt_tokens();
    const std::string checksum = c_.checksum(out.request_id, n);
    job.accounting = {{"mode", "local"},
                      {"prompt_tokens", n},
                      {"bytes", 0},
                      {"descriptors_uncoalesced", 0},
                      {"descriptors", 0},
                      {"prefill_ms", (step_end - step_start) * 1e3},
                      {"transfer_ms", 0.0},
                      {"src_checksum", checksum},
                      {"dst_checksum", checksum},
                      {"paced_bytes_per_second", 0.0}};
    c_.send({{"type", "kv_ready"},
             {"req", job.req},
             {"first_token", out.token},
             {"src_blocks", c_.blocks_of(out.request_id)},
             {"accounting", job.accounting}});
  } else {
    c_.send({{"type", "token"}, {"req", job.req}, {"token", out.token}});
  }
  if (out.finish_reason != FinishReason::NONE) finish(out.request_id);
}

void DecodeRole::finish(int id) {
  DecodeJob& job = jobs_.at(id);
  job.accounting["num_preemptions"] = c_.engine.request(id).num_preemptions;
  c_.send({{"type", "finished"}, {"req", job.req}, {"accounting", job.accounting}});
  ++c_.served;
  drop(id);
}

void DecodeRole::drop(int id) {
  c_.engine.abort_request(id);  // false when it has finished already
  c_.engine.release_request(id);
  jobs_.erase(id);
}

bool DecodeRole::abort(std::int64_t req) {
  const auto it = find(req);
  if (it == jobs_.end()) return false;
  drop(it->first);
  return true;
}

bool DecodeRole::waiting_for_kv() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [&](const auto& j) {
    return c_.engine.request(j.first).status == RequestStatus::WAITING_FOR_REMOTE_KV;
  });
}

void DecodeRole::expire(double now) {
  std::vector<int> late;
  for (const auto& [id, job] : jobs_)
    if (c_.engine.request(id).status == RequestStatus::WAITING_FOR_REMOTE_KV && now > job.deadline) late.push_back(id);
  for (int id : late) {
    c_.report_failure(jobs_.at(id).req,
                      "no KV arrived within --kv-timeout " + std::to_string(c_.config.kv_timeout) + " s; blocks freed");
    drop(id);
  }
}

}  // namespace servelab::disagg
