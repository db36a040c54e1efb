#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Sourced by the llama.cpp side-by-side scripts: fetches llama.cpp's source
# from PyPI (the llama-cpp-python sdist vendors a pinned llama.cpp tree, so
# nothing needs GitHub), installs its gguf-py into a venv, and builds the
# named targets CPU-only with -march=native (GGML_NATIVE).
#
# Needs: work (a folder), version (llama-cpp-python's), and the targets as
# arguments of llamacpp_build. Sets: src (the llama.cpp tree), llama_bin (its build/bin).
llamacpp_build() {
  src="$work/llama_cpp_python-$version/vendor/llama.cpp"
  llama_bin="$src/build/bin"
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
    cmake -S "$src" -B "$src/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
      -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF >&2
    cmake --build "$src/build" -j"$(nproc)" --target "${missing[@]}" >&2
  fi
}
