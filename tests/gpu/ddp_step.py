"""A few PyTorch DistributedDataParallel steps with the NCCL backend, for
tests/gpu/device_check.sh to record under replay.

World size 1 by default (one GPU; set RANK/WORLD_SIZE/MASTER_* for more). The
data and the model are seeded, so the printed losses and the parameter digest
are the same on every run, with or without the preload; an explicit
all_reduce of the loss and a barrier each step make sure the trace holds NCCL
collectives of several shapes whatever DDP does at this world size.

Usage: python3 ddp_step.py [STEPS]
"""
import hashlib
import os
import sys

import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def main() -> int:
    steps = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    rank = int(os.environ.get("RANK", "0"))
    world = int(os.environ.get("WORLD_SIZE", "1"))
    device = torch.device("cuda", rank % torch.cuda.device_count())
    torch.cuda.set_device(device)
    dist.init_process_group("nccl", rank=rank, world_size=world, device_id=device)

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    ).to(device)
    ddp = DistributedDataParallel(model, device_ids=[device.index])
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
        print(f"rank {rank} step {step} loss {total.item() / world:.6f}", flush=True)

    digest = hashlib.sha256()
    for p in model.parameters():
        digest.update(p.detach().cpu().numpy().tobytes())
    print(f"rank {rank} params {digest.hexdigest()[:16]}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
