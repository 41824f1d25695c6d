"""A few PyTorch DistributedDataParallel steps with the NCCL backend, for
tests/gpu/device_check.sh to record under replay (with --cpu, over gloo on
CPUs, for tests/e2e/torch_e2e_test.cpp).

World size 1 by default (one GPU; set RANK/WORLD_SIZE/MASTER_* or run under
torchrun for more). The data and the model are seeded, so the printed losses
and the parameter digest are the same on every run, with or without the
preload; an explicit all_reduce of the loss and a barrier each step make sure
NCCL sees collectives of several shapes whatever DDP does at this world size.

Usage: python3 ddp_step.py [STEPS] [--cpu] [--one-gpu] [--flight-recorder DIR]
  --cpu                  gloo on CPUs instead of NCCL on GPUs (any PyTorch
                         from 1.13 on)
  --one-gpu              every rank on GPU 0, each with its own NCCL_HOSTID, so
                         that NCCL takes them for ranks of different hosts (it
                         refuses two ranks of one host on one GPU) and runs
                         its kernels and its network transport between them
  --flight-recorder DIR  at the end, write PyTorch's Flight Recorder dump of
                         this rank (TORCH_NCCL_TRACE_BUFFER_SIZE must be set)
                         to DIR/nccl_trace_rank_<rank>, as PyTorch dumps it

Prints per step "rank R step S loss L", then "rank R params DIGEST", and
once, on rank 0, what NCCL it runs: "nccl VERSION linked-into-torch yes|no".
"""
import ctypes
import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel



def say(line):
    # One write per line: the ranks share stdout, and print may split a line
    # in two writes that another rank's line falls between.
    os.write(1, (line + "\n").encode())

def nccl_linkage() -> str:
    """Whether the process has a libnccl.so.2 of its own (whose functions a
    preload can interpose) or NCCL only inside libtorch_cuda.so."""
    try:
        ctypes.CDLL("libnccl.so.2", mode=os.RTLD_NOLOAD)
        return "no"
    except OSError:
        return "yes"


def main() -> int:
    args = sys.argv[1:]
    steps = int(args[0]) if args and args[0].isdigit() else 5
    cpu = "--cpu" in args
    one_gpu = "--one-gpu" in args
    fr_dir = args[args.index("--flight-recorder") + 1] if "--flight-recorder" in args else None
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if one_gpu:
        os.environ["NCCL_HOSTID"] = f"replay-device-check-{rank}"
    if cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo", rank=rank, world_size=world)
    else:
        device = torch.device("cuda", 0 if one_gpu else rank % torch.cuda.device_count())
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)
    if rank == 0 and not cpu:
        say(f"nccl {'.'.join(map(str, torch.cuda.nccl.version()))} linked-into-torch {nccl_linkage()}")

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).to(device)
    ddp = DistributedDataParallel(model, device_ids=None if cpu else [device.index])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.05)
    gen = torch.Generator().manual_seed(1 + rank)
    for step in range(steps):
        x = torch.randn(64, 256, generator=gen).to(device)
        y = torch.randint(0, 10, (64,), generator=gen).to(device)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        total = loss.detach().clone()
        dist.all_reduce(total)
        dist.barrier()
        say(f"rank {rank} step {step} loss {total.item() / world:.6f}")

    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    say(f"rank {rank} params {digest.hexdigest()[:16]}")
    if fr_dir is not None:
        try:
            dump = torch._C._distributed_c10d._dump_nccl_trace(
                includeCollectives=True, includeStackTraces=False, onlyActive=False
            )
            os.makedirs(fr_dir, exist_ok=True)
            with open(os.path.join(fr_dir, f"nccl_trace_rank_{rank}"), "wb") as f:
                f.write(dump)
            say(f"flight recorder: rank {rank} dumped {len(dump)} bytes")
        except Exception as e:  # the losses above stand; the dump's step reports it
            say(f"flight recorder: rank {rank} could not dump: {e!r}")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
