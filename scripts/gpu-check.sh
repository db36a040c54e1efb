#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# GPU check: on a machine with a CUDA GPU, build servelab with its CUDA
# backend in a folder of its own, run every test labelled "gpu" (each op and
# whole generations against the CPU backend), then benchmark the
# qwen2.5-1.5b shape in bf16 and print two Markdown tables last: per op and
# per step, time, achieved TFLOP/s or GB/s, and the fraction of the cuBLAS
# bf16 peak or the copy bandwidth measured in the same run. Under 8 minutes on
# an H200. Exits non-zero, at once, where there is no GPU or no nvcc.
#
# Its own build folder (default build-gpu) because a build/ first configured
# where nvcc was missing stays CPU-only: CMake caches that CUDA was not found.
#
# Usage: bash scripts/gpu-check.sh [build-dir]   (default: build-gpu)
# Environment: GPU_CHECK_ARCH (default native: only this GPU's architecture,
# half the nvcc time of the default sm_80 + sm_90 list).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build-gpu}"
start=$SECONDS
say() { echo "gpu-check: $*" >&2; }

# 1. What this needs, checked before spending minutes on a build.
if ! command -v nvcc >/dev/null && [ -x /usr/local/cuda/bin/nvcc ]; then export PATH="/usr/local/cuda/bin:$PATH"; fi
command -v nvcc >/dev/null || { say "nvcc not found: install the CUDA toolkit (the CUDA backend is built only where nvcc exists)"; exit 1; }
gpus=""
command -v nvidia-smi >/dev/null && gpus="$(nvidia-smi -L 2>/dev/null | grep '^GPU' || true)"
if [ -z "$gpus" ] && compgen -G "/proc/driver/nvidia/gpus/*" >/dev/null; then gpus="$(ls /proc/driver/nvidia/gpus)"; fi
if [ -z "$gpus" ]; then
  say "no GPU on this machine (nvidia-smi lists none and /proc/driver/nvidia/gpus is empty):"
  say "the gpu tests would only report SKIP. Run this script where a CUDA GPU is available."
  exit 1
fi
say "GPU: $(echo "$gpus" | head -n 1)"

# 2. Build with CUDA, only what the check runs. Warnings are errors, as in CI.
jobs="$(nproc)"
cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DSERVELAB_WERROR=ON -DSERVELAB_BUILD_BENCH=ON \
  -DCMAKE_CUDA_ARCHITECTURES="${GPU_CHECK_ARCH:-native}" >&2
grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=/' "$build/CMakeCache.txt" ||
  { say "CMake did not enable CUDA in $build (see its CMakeCache.txt)"; exit 1; }
cmake --build "$build" -j"$jobs" --target gpu_tests bench_cuda_speed >&2
say "built in $((SECONDS - start)) s"

# 3. The gpu tests. A skip here means the binaries saw no device: that is a failure.
log="$build/gpu-check-ctest.log"
if ! ctest --test-dir "$build" -L gpu -j4 --timeout 240 --output-on-failure --no-tests=error 2>&1 | tee "$log" >&2; then
  say "gpu tests FAILED (log: $log)"
  tests_failed=1
else
  tests_failed=0
fi
if grep -q "(Skipped)\|Not Run" "$log"; then
  say "gpu tests were skipped although a GPU is present (log: $log)"
  exit 1
fi
tests="$(grep -o '[0-9]* tests failed out of [0-9]*' "$log" | tail -n 1 || true)"
say "gpu tests done ($tests) at $((SECONDS - start)) s"
# The worst errors the tests measured (WARN lines), for the tolerance comments.
grep -h "worst |gpu" "$log" >&2 || true

# 4. The benchmark, even when a test failed (its tables are still worth having); tables last.
table="$build/gpu-check-bench.md"
timeout 240 "$build/bench/bench_cuda_speed" >"$table" || say "bench_cuda_speed failed or timed out (partial table below)"
say "done in $((SECONDS - start)) s"
cat "$table"
exit "$tests_failed"
