#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by the llama.cpp side-by-side scripts: fetches llama.cpp's source
# from PyPI (the llama-cpp-python sdist vendors a pinned llama.cpp tree, so
# nothing needs GitHub), installs its gguf-py into a venv, and builds the
# named targets CPU-only with -march=native (GGML_NATIVE, unless SERVELAB_ISA=avx2); the server is
# configured too, so llama-server is one of the targets a caller may name.
#
# Sourcing it also reads what these scripts take: rounds (their argument, 1-99,
# default 3), work (WORK, default build/llamacpp) and version
# (LLAMA_CPP_PYTHON_VERSION, default 0.3.36); the caller sets root first.
# llamacpp_build TARGET... then sets src (the llama.cpp tree) and llama_bin (its build/bin);
# smollm2_files (after llamacpp_build llama-quantize) fills smollm2[f32|bf16|q8_0|q4_1].
#
# SERVELAB_ISA=avx2 rehearses an AVX2-only CPU (Zen 2/3, older Xeons) on an AVX-512 one, on both sides:
# servelab's kernels read it themselves (cpu::active_isa()), and llama.cpp is built in build-avx2/ with
# GGML_NATIVE=OFF, whose defaults are AVX2, FMA, F16C and BMI2 without AVX-512.
rounds="${1:-3}"
[[ "$rounds" =~ ^[1-9][0-9]?$ ]] || { echo "$(basename "$0"): error: rounds must be 1-99, got '$rounds'" >&2; exit 1; }
work="${WORK:-$root/build/llamacpp}"
version="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
case "${SERVELAB_ISA:-}" in
  "" | avx512) llamacpp_dir=build llamacpp_isa=(-DGGML_NATIVE=ON) ;;
  avx2) llamacpp_dir=build-avx2 llamacpp_isa=(-DGGML_NATIVE=OFF) ;;
  *) echo "$(basename "$0"): error: SERVELAB_ISA must be avx512 or avx2 here, got '$SERVELAB_ISA'" >&2; exit 1 ;;
esac
mkdir -p "$work"

llamacpp_build() {
  src="$work/llama_cpp_python-$version/vendor/llama.cpp"
  llama_bin="$src/$llamacpp_dir/bin"
  if [ ! -d "$src" ]; then
    python3 -m venv "$work/venv"
    "$work/venv/bin/pip" download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$version"
    tar xzf "$work/llama_cpp_python-$version.tar.gz" -C "$work"
  fi
  # The tree's own gguf-py, with the dependencies it declares (numpy, pyyaml, ...).
  "$work/venv/bin/python" -c "import gguf" 2>/dev/null || "$work/venv/bin/pip" install -q "$src/gguf-py"
  local missing=()
  for target in "$@"; do [ -x "$llama_bin/$target" ] || missing+=("$target"); done
  if ((${#missing[@]})); then
    cmake -S "$src" -B "$src/$llamacpp_dir" -DCMAKE_BUILD_TYPE=Release "${llamacpp_isa[@]}" -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON >&2
    cmake --build "$src/$llamacpp_dir" -j"$(nproc)" --target "${missing[@]}" >&2
  fi
}

# SmolLM2-135M-Instruct (scripts/get-model.sh) as the Q4_1 it ships and as Q8_0, bf16 and f32 files
# written from it by llama.cpp's own tool (requantized from Q4_1's values), so both sides load one file.
declare -A smollm2
smollm2_files() {
  smollm2[q4_1]="$root/models/SmolLM2-135M-Instruct.Q4_1.gguf"
  [ -f "${smollm2[q4_1]}" ] || { echo "error: ${smollm2[q4_1]} not found (bash scripts/get-model.sh)" >&2; exit 1; }
  local type t
  for type in Q8_0 BF16 F32; do
    t="${type,,}"
    smollm2[$t]="$work/SmolLM2-135M-Instruct.$type.gguf"
    [ -f "${smollm2[$t]}" ] || "$llama_bin/llama-quantize" --allow-requantize "${smollm2[q4_1]}" "${smollm2[$t]}" "$type" >/dev/null 2>&1
  done
}
