"""Reads `replay dump --json` of a recording of bench/nccl_allreduce_sweep
--poison at level data on stdin. On a one-rank communicator an allreduce
receives exactly what it sent; at level data the send buffer is fingerprinted
on the GPU by the kernel and the received bytes on the host from their copy,
so every completion's two fingerprints and NaN/Inf counts must be equal.
Exits 1 unless some were compared, none differed and NaNs were counted."""
import json
import sys

trace = json.load(sys.stdin)
same = differ = with_nan = 0
for rank in trace["ranks"]:
    for e in rank["events"]:
        if e.get("kind") != "completion" or "send_hash" not in e or "recv_hash" not in e:
            continue
        sent = (e["send_hash"], e["send_nan"], e["send_inf"])
        received = (e["recv_hash"], e["recv_nan"], e["recv_inf"])
        if sent == received:
            same += 1
        else:
            differ += 1
            print("differ:", json.dumps(e, sort_keys=True))
        with_nan += e["send_nan"] > 0
print(f"{same} operations with equal fingerprints, {differ} different, {with_nan} with a NaN counted")
sys.exit(0 if same > 0 and differ == 0 and with_nan > 0 else 1)
