#!/usr/bin/env python3
"""A data-parallel trainer in the style of a real one, with numpy and mpi4py.

Each rank draws its shard of a synthetic classification problem from a
generator seeded by the operating system (numpy.random.default_rng() with no
seed), shuffles with Python's random module, names the run with os.urandom,
and trains a two-layer network: gradients are averaged with a buffer
Allreduce, metrics with pickled allreduce, the run configuration is broadcast
as a pickled object, per-rank statistics are gathered, and rank 0 collects
progress reports from whichever rank sends first (a wildcard receive) while
polling a non-blocking receive with Test. Ranks of even and odd number form
sub-communicators for an evaluation step.

Everything printed is deterministic given what was drawn: a re-run that
serves the same entropy prints the same lines.
"""
import argparse
import os
import random
import sys

import numpy as np
from mpi4py import MPI


def say(line):
    # One write per line, so that the lines of several ranks never interleave.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse():
    p = argparse.ArgumentParser()
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=16)
    p.add_argument("--lr", type=float, default=0.1)
    return p.parse_args()


def main():
    args = parse()
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()

    # Rank 0 decides the run's name and configuration; every rank gets them.
    config = None
    if rank == 0:
        config = {"run": os.urandom(4).hex(), "features": 8, "classes": 3, "lr": args.lr}
    config = comm.bcast(config, root=0)

    rng = np.random.default_rng()  # seeded from the operating system
    features, classes = config["features"], config["classes"]
    x = rng.standard_normal((args.batch * 4, features))
    w_true = rng.standard_normal((features, classes))
    y = np.argmax(x @ w_true, axis=1)

    # The same initial parameters everywhere: rank 0's, broadcast as a buffer.
    w1 = rng.standard_normal((features, args.hidden)) * 0.1
    w2 = rng.standard_normal((args.hidden, classes)) * 0.1
    comm.Bcast(w1, root=0)
    comm.Bcast(w2, root=0)

    order = list(range(x.shape[0]))
    team = comm.Split(rank % 2, rank)
    for step in range(1, args.steps + 1):
        random.shuffle(order)
        idx = np.array(order[: args.batch])
        xb, yb = x[idx], y[idx]
        h = np.tanh(xb @ w1)
        logits = h @ w2
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        loss = float(-np.log(p[np.arange(len(yb)), yb] + 1e-12).mean())
        d = p
        d[np.arange(len(yb)), yb] -= 1
        d /= len(yb)
        g2 = h.T @ d
        g1 = xb.T @ ((d @ w2.T) * (1 - h * h))
        grads = np.concatenate([g1.ravel(), g2.ravel()])
        comm.Allreduce(MPI.IN_PLACE, grads, op=MPI.SUM)
        grads /= size
        w1 -= config["lr"] * grads[: w1.size].reshape(w1.shape)
        w2 -= config["lr"] * grads[w1.size:].reshape(w2.shape)
        mean_loss = comm.allreduce(loss, op=MPI.SUM) / size
        say(f"step {step} rank {rank} loss {loss!r} mean {mean_loss!r}")

        # Progress reports to rank 0, taken in whatever order they arrive.
        if rank == 0:
            got = []
            req = comm.irecv(source=MPI.ANY_SOURCE, tag=7)
            while True:
                done, report = req.test()
                if done:
                    break
            got.append(report)
            for _ in range(size - 2):
                got.append(comm.recv(source=MPI.ANY_SOURCE, tag=7))
            say(f"step {step} rank 0 reports {sorted(r['rank'] for r in got)!r} first {got[0]['rank']}")
        else:
            comm.send({"rank": rank, "step": step, "loss": loss}, dest=0, tag=7)

    # Evaluation on the sub-communicators, and statistics gathered at rank 0.
    accuracy = float((np.argmax(np.tanh(x @ w1) @ w2, axis=1) == y).mean())
    team_accuracy = team.allreduce(accuracy, op=MPI.SUM) / team.Get_size()
    stats = comm.gather({"rank": rank, "accuracy": accuracy}, root=0)
    digest = np.concatenate([w1.ravel(), w2.ravel()]).tobytes().hex()[:32]
    say(f"rank {rank} run {config['run']} team {rank % 2} accuracy {team_accuracy!r} params {digest}")
    if rank == 0:
        say(f"stats {[round(s['accuracy'], 6) for s in stats]!r}")
    team.Free()


if __name__ == "__main__":
    main()
