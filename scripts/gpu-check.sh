#!/usr/bin/env bash
# GPU check: on a machine with a CUDA GPU, build servelab with its CUDA
# backend, run every test labelled "gpu" (each op and whole generations
# against the CPU backend), then benchmark the qwen2.5-0.5b shape in bf16
# (prefill and decode tokens/s beside the GPU's measured copy bandwidth and
# cuBLAS peak). Prints a short Markdown table last. Takes a few minutes on an
# H200 (under 8). Exits non-zero, at once, where there is no GPU or no nvcc.
#
# Usage: bash scripts/gpu-check.sh [build-dir]   (default: build, the release preset's)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${1:-$root/build}"
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

# 2. Build with CUDA: the release preset, only what the check runs.
jobs="$(nproc)"
cmake -S "$root" -B "$build" --preset release >&2
grep -q '^CMAKE_CUDA_COMPILER:[A-Z]*=/' "$build/CMakeCache.txt" ||
  { say "CMake did not enable CUDA in $build (see its CMakeCache.txt)"; exit 1; }
cmake --build "$build" -j"$jobs" --target gpu_tests bench_cuda_speed servelab >&2
say "built in $((SECONDS - start)) s"

# 3. The gpu tests. A skip here means the binaries saw no device: that is a failure.
log="$build/gpu-check-ctest.log"
if ! ctest --test-dir "$build" -L gpu -j2 --timeout 300 --output-on-failure --no-tests=error 2>&1 | tee "$log" >&2; then
  say "gpu tests FAILED (log: $log)"
  exit 1
fi
if grep -q "(Skipped)\|Not Run" "$log"; then
  say "gpu tests were skipped although a GPU is present (log: $log)"
  exit 1
fi
tests="$(grep -o '[0-9]* tests failed out of [0-9]*' "$log" | tail -n 1)"
say "gpu tests passed ($tests) at $((SECONDS - start)) s"

# 4. The benchmark; its table is the last thing printed.
table="$build/gpu-check-bench.md"
timeout 240 "$build/bench/bench_cuda_speed" >"$table"
say "done in $((SECONDS - start)) s"
cat "$table"
