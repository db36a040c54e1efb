// SPDX-License-Identifier: MIT
#include "perf/counter.h"

namespace servelab {

Work& Work::operator+=(const Work& o) {
  flops += o.flops;
  weight_bytes += o.weight_bytes;
  act_read += o.act_read;
  act_written += o.act_written;
  kv_read += o.kv_read;
  kv_written += o.kv_written;
  return *this;
}

Work WorkCounter::total() const {
  Work sum;
  for (const auto& [name, work] : ops_) sum += work;
  return sum;
}

}  // namespace servelab
