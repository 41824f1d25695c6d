// device.h on the CUDA runtime.
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "device.h"

namespace nccl_train::device {
namespace {

void Check(cudaError_t result, const char* what) {
  if (result == cudaSuccess) return;
  std::fprintf(stderr, "nccl_train: %s: %s\n", what, cudaGetErrorString(result));
  std::exit(1);
}

}  // namespace

const char* Kind() { return "cuda"; }

int Count() {
  int count = 0;
  Check(cudaGetDeviceCount(&count), "cudaGetDeviceCount");
  return count;
}

void Select(int device) { Check(cudaSetDevice(device), "cudaSetDevice"); }

Stream CreateStream() {
  Stream stream = nullptr;
  Check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  return stream;
}

void DestroyStream(Stream stream) { Check(cudaStreamDestroy(stream), "cudaStreamDestroy"); }

void Synchronize(Stream stream) { Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize"); }

void* Alloc(size_t bytes) {
  void* ptr = nullptr;
  Check(cudaMalloc(&ptr, bytes), "cudaMalloc");
  return ptr;
}

void Free(void* ptr) { Check(cudaFree(ptr), "cudaFree"); }

void CopyToDevice(void* dst, const void* src, size_t bytes, Stream stream) {
  Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
}

void CopyToHost(void* dst, const void* src, size_t bytes, Stream stream) {
  Check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
}

}  // namespace nccl_train::device
