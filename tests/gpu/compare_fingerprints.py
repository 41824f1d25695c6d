"""Compares two recordings of bench/nccl_allreduce_sweep --poison at level
data: `replay dump --json` of one where device buffers are fingerprinted by
the recorder's kernel (argument 1) and of one where they are fingerprinted on
the host from page-locked copies (REPLAY_DEVICE_HASH=copy; argument 2). The
sweep is deterministic, so the two make the same operations on the same bytes
in the same order: every completion's send and receive fingerprints and
NaN/Inf counts must be equal across the two, and, on a one-rank communicator,
within each. Exits 1 unless some were compared, none differed and NaNs were
counted."""
import json
import sys


def fingerprints(path):
    out = []
    with open(path) as f:
        trace = json.load(f)
    for rank in trace["ranks"]:
        for e in rank["events"]:
            if e.get("kind") != "completion" or "send_hash" not in e or "recv_hash" not in e:
                continue
            out.append(((e["send_hash"], e["send_nan"], e["send_inf"]), (e["recv_hash"], e["recv_nan"], e["recv_inf"])))
    return out


kernel, copies = fingerprints(sys.argv[1]), fingerprints(sys.argv[2])
same = differ = with_nan = 0
for i, (k, c) in enumerate(zip(kernel, copies)):
    if k == c and k[0] == k[1]:
        same += 1
    else:
        differ += 1
        print(f"operation {i}: kernel {k}, copies {c}")
    with_nan += k[0][1] > 0
if len(kernel) != len(copies):
    print(f"the recordings differ in length: {len(kernel)} and {len(copies)} completions")
    differ += 1
print(f"{same} operations fingerprinted alike by the kernel and from copies, {differ} not, {with_nan} with a NaN counted")
sys.exit(0 if same > 0 and differ == 0 and with_nan > 0 else 1)
