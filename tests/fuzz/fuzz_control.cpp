// SPDX-License-Identifier: MIT
/**
 * @file fuzz_control.cpp
 * @brief libFuzzer target: one control-plane frame through parse_control() for each kind of
 *        sender, and the nested readers a receiver then runs on what the schema let through.
 *
 * Whatever the bytes, each call either returns or throws servelab::Error: anything else
 * (another exception, a crash, a sanitizer report) is a finding.
 */
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string_view>

#include "core/error.h"
#include "disagg/control.h"

namespace {

using servelab::disagg::Message;
using servelab::disagg::Sender;

void read_nested(const Message& m) {
  using namespace servelab::disagg;
  for (const char* key : {"kv_layout", "transport"}) {
    if (!m.contains(key)) continue;
    try {
      if (key[0] == 'k')
        (void)kv_layout_from_json(m[key]);
      else
        (void)transport_info_from_json(m[key]);
    } catch (const servelab::Error&) {
    }
  }
  try {
    (void)sampling_from(m, std::numeric_limits<std::int32_t>::max());
  } catch (const servelab::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view frame(reinterpret_cast<const char*>(data), size);
  for (const Sender sender : {Sender::CLIENT, Sender::WORKER, Sender::ROUTER}) {
    try {
      const Message m = servelab::disagg::parse_control(frame, sender);
      // What the schema accepted has a string type.
      if (!m.is_object() || !m["type"].is_string()) __builtin_trap();
      read_nested(m);
    } catch (const servelab::Error&) {
    }
  }
  return 0;
}
