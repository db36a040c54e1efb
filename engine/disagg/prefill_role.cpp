// SPDX-License-Identifier: MIT
#include "disagg/prefill_role.h"

#include <algorithm>
#include <iostream>

#include "core/error.h"
#include "core/timer.h"
#include "disagg/kv_transfer_plan.h"

namespace servelab::disagg {

void PrefillRole::prefill(const Message& m) {
  take_on(c_, m, "prefill", "queued here already", [&](std::int64_t req) {
    const std::vector<std::int32_t> prompt = field_ids(m, "prompt", c_.vocab_size - 1);
    PrefillJob job{.req = req, .decode_worker = field_worker(m, "decode_worker")};
    job.dst = field_ids(m, "dst_blocks", c_.peer(job.decode_worker).layout.num_blocks - 1);
    // The first token is this side's; stop tokens matter on the decode side only.
    const RequestSampling sampling = sampling_from(m, c_.vocab_size);
    const int id = c_.engine.add_request(prompt, sampling.params, 1);
    jobs_.emplace(id, std::move(job));
  });
}

void PrefillRole::release(int id) {
  c_.engine.release_request(id);
  jobs_.erase(id);
}

bool PrefillRole::abort(std::int64_t req) {
  const auto it = find(req);
  if (it == jobs_.end()) return false;
  c_.engine.abort_request(it->first);  // false when it has run already and only holds its KV
  release(it->first);
  return true;
}

void PrefillRole::read_done(std::int64_t req) {
  const auto it = find(req);
  if (it != jobs_.end() && it->second.held_until >= 0) release(it->first);
}

bool PrefillRole::holding() const {
  return std::any_of(jobs_.begin(), jobs_.end(), [](const auto& j) { return j.second.held_until >= 0; });
}

void PrefillRole::expire(double now) {
  std::vector<int> late;
  for (const auto& [id, job] : jobs_)
    if (job.held_until >= 0 && now > job.held_until) late.push_back(id);
  for (int id : late) {
    std::cerr << "servelab worker (prefill): request " << jobs_.at(id).req
              << " never confirmed its read; blocks freed\n";
    release(id);
  }
}

void PrefillRole::on_layer(int layer) {
  for (auto& [id, job] : jobs_) {
    // The step's prompts are the RUNNING ones: each finishes in the step that computes it.
    if (c_.engine.request(id).status != RequestStatus::RUNNING || !job.stream_error.empty()) continue;
    if (layer == 0) {
      try {
        const Peer& decode = c_.peer(job.decode_worker);
        const std::vector<std::int32_t> src = c_.blocks_of(id);
        const int n = c_.engine.request(id).num_prompt_tokens();
        std::vector<std::vector<TransferDescriptor>> layers;
        for (int l = 0; l < c_.layout.num_layers; ++l) {
          layers.push_back(plan_transfer(c_.layout, src, decode.layout, job.dst, n, l, l + 1).descriptors);
          job.streamed_descriptors += layers.back().size();
        }
        job.streamer =
            std::make_unique<LayerStreamer>(c_.transport, decode.handle, std::move(layers), c_.transfer_options());
      } catch (const Error& e) {
        job.stream_error = e.what();  // the hook runs inside the forward pass: report after the step
        continue;
      }
    }
    if (job.streamer) job.streamer->layer_done(layer);
  }
}

void PrefillRole::on_first_token(const RequestOutput& out, double step_start, double step_end) {
  PrefillJob& job = jobs_.at(out.request_id);
  const std::int64_t req = job.req;  // transfer() may have released the job when a later call throws
  try {
    check(job.stream_error.empty(), job.stream_error);
    transfer(out.request_id, job, out.token, step_start, step_end);
  } catch (const Error& e) {
    c_.report_failure(req, e.what());
    if (owns(out.request_id)) release(out.request_id);
  }
}

void PrefillRole::transfer(int id, PrefillJob& job, std::int32_t first, double t0, double t1) {
  const Peer& decode = c_.peer(job.decode_worker);
  const std::vector<std::int32_t> src = c_.blocks_of(id);
  const int n = c_.engine.request(id).num_prompt_tokens();
  const TransferPlan plan = plan_transfer(c_.layout, src, decode.layout, job.dst, n, 0, c_.layout.num_layers);
  const std::int64_t req = job.req;
  Message accounting = {{"mode", to_string(c_.config.mode)},
                        {"prompt_tokens", n},
                        {"bytes", plan.bytes},
                        {"descriptors_uncoalesced", plan.num_uncoalesced},
                        {"descriptors", plan.descriptors.size()},
                        {"prefill_ms", (t1 - t0) * 1e3},
                        {"src_checksum", c_.checksum(id, n)},
                        {"paced_bytes_per_second", c_.pace},
                        {"layerwise", c_.config.layerwise}};
  Message ready = {{"type", "kv_ready"}, {"req", req}, {"first_token", first}, {"src_blocks", src}};
  if (c_.config.mode == TransferMode::READ) {
    // vLLM's delayed free: the blocks stay until decode has read them, or kv_timeout.
    ready["accounting"] = accounting;
    c_.send(ready);
    job.held_until = now_seconds() + c_.config.kv_timeout;
    ++c_.served;
    return;
  }
  if (job.streamer) {
    // Per layer: the link was busy for busy_seconds, overlapped_seconds of them while the forward ran;
    // the request waited exposed_ms beyond its compute for the last layer.
    const StreamStats st = job.streamer->finish(t0, t1);
    accounting["transfer_ms"] = st.busy_seconds * 1e3;
    accounting["gb_per_s"] = static_cast<double>(plan.bytes) / st.busy_seconds / 1e9;
    accounting["transfer_over_prefill"] = st.busy_seconds / (t1 - t0);
    accounting["overlapped_ms"] = st.overlapped_seconds * 1e3;
    accounting["overlap_fraction"] = st.overlapped_seconds / st.busy_seconds;
    accounting["exposed_ms"] = std::max(0.0, st.end - t1) * 1e3;
    accounting["descriptors"] = job.streamed_descriptors;
  } else {
    const double t_send = now_seconds();  // the transfer alone: the checksum above is the lab's, not the protocol's
    if (c_.config.mode == TransferMode::SEND) {
      c_.send({{"type", "kv_sending"}, {"req", req}, {"src_blocks", src}});
      c_.transport.send(decode.handle, kv_send_tag(req), plan.descriptors, c_.transfer_options());
    } else {
      c_.transport.write(decode.handle, plan.descriptors, c_.transfer_options());
    }
    const double seconds = now_seconds() - t_send;
    accounting["transfer_ms"] = seconds * 1e3;
    accounting["gb_per_s"] = static_cast<double>(plan.bytes) / seconds / 1e9;
    accounting["transfer_over_prefill"] = seconds / (t1 - t0);
  }
  ready["accounting"] = accounting;
  release(id);
  c_.send(ready);
  ++c_.served;
}

}  // namespace servelab::disagg
