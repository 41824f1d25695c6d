#!/usr/bin/env python3
"""Averages a 1 MiB gradient with mpi4py's buffer Allreduce, four steps.

At step 2, rank 1's gradient gets one NaN in the middle (element 100003),
where a sampled fingerprint of what the others receive does not look; the
average carries it to every rank, which all send it into step 3's allreduce.
Prints each rank's NaN count at the end.
"""
import numpy as np
from mpi4py import MPI

comm = MPI.COMM_WORLD
grad = np.ones(262144, dtype=np.float32)
for step in range(4):
    if step == 2 and comm.rank == 1:
        grad[100003] = np.nan
    total = np.empty_like(grad)
    comm.Allreduce(grad, total, op=MPI.SUM)
    grad = total / comm.size
print("rank", comm.rank, "nan", int(np.isnan(grad).sum()), flush=True)
