// SPDX-License-Identifier: MIT
#include "cuda/graph.h"

#include "cuda/check.h"

namespace servelab::cuda {

GraphCache::~GraphCache() { clear(); }

void GraphCache::clear() {
  for (auto& [key, exec] : graphs_) cudaGraphExecDestroy(exec);  // not checked: runs in the destructor too
  graphs_.clear();
}

void GraphCache::run(std::uint64_t key, const std::function<void()>& record) {
  if (const auto it = graphs_.find(key); it != graphs_.end()) {
    CUDA_CHECK(cudaGraphLaunch(it->second, cudaStreamPerThread));
    ++replays_;
    return;
  }
  if (graphs_.size() >= kMaxGraphs) {
    record();  // too many shapes: run this one eagerly
    return;
  }
  // ThreadLocal: only this thread's calls are restricted while it captures.
  CUDA_CHECK(cudaStreamBeginCapture(cudaStreamPerThread, cudaStreamCaptureModeThreadLocal));
  cudaGraph_t graph = nullptr;
  try {
    record();
  } catch (...) {
    (void)cudaStreamEndCapture(cudaStreamPerThread, &graph);  // leave capture mode before reporting
    if (graph != nullptr) cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw;
  }
  CUDA_CHECK(cudaStreamEndCapture(cudaStreamPerThread, &graph));
  cudaGraphExec_t exec = nullptr;
  const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);  // the executable graph keeps what it needs
  CUDA_CHECK(made);
  graphs_.emplace(key, exec);
  ++captures_;
  CUDA_CHECK(cudaGraphLaunch(exec, cudaStreamPerThread));  // capture queued nothing: run it now
}

}  // namespace servelab::cuda
