#!/usr/bin/env python3
"""Averages a 1 MiB gradient with mpi4py's buffer Allreduce, step by step.

At step --nan-step, rank --nan-rank's gradient gets one NaN in the middle
(element --nan-at), where a sampled fingerprint of what the others receive
does not look; the average carries it to every rank, which all send it into
the next step's allreduce. Prints each rank's NaN count at the end.
"""
import argparse

import numpy as np
from mpi4py import MPI


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--elements", type=int, default=262144)
    p.add_argument("--nan-rank", type=int, default=1)
    p.add_argument("--nan-step", type=int, default=2)
    p.add_argument("--nan-at", type=int, default=100003)
    args = p.parse_args()
    comm = MPI.COMM_WORLD
    grad = np.ones(args.elements, dtype=np.float32)
    for step in range(args.steps):
        if step == args.nan_step and comm.rank == args.nan_rank:
            grad[args.nan_at] = np.nan
        total = np.empty_like(grad)
        comm.Allreduce(grad, total, op=MPI.SUM)
        grad = total / comm.size
    print("rank", comm.rank, "nan", int(np.isnan(grad).sum()), flush=True)


if __name__ == "__main__":
    main()
