"""A Triton kernel launched a known number of times on a stream of its own,
for tests/gpu/device_check.sh to record under replay.

Triton launches its kernels from a launcher it compiles into a Python
extension module linked against libcuda, which Python imports by dlopen and
dlsym: the trace counts these launches only through the preload's handling of
objects linked against libcuda (interpose/cuda_imports.h), or, where Triton
looks cuLaunchKernelEx up with dlsym, through its dlsym.

Usage: python3 triton_step.py [LAUNCHES]
"""
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_one(x_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(x_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + 1, mask=mask)


def main() -> int:
    launches = int(sys.argv[1]) if len(sys.argv) > 1 else 50
    x = torch.zeros(4096, device="cuda")
    torch.cuda.synchronize()
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        for _ in range(launches):
            add_one[(4,)](x, x.numel(), BLOCK=1024)
    stream.synchronize()
    print(f"triton launches {launches} value {x[0].item():.0f} stream {stream.cuda_stream:#x}", flush=True)
    return 0 if int(x[0].item()) == launches else 1


if __name__ == "__main__":
    sys.exit(main())
