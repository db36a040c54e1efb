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

}  // namespace servelab
