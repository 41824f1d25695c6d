"""Reads `replay dump --json` on stdin and prints how many kernel launches the
trace counts on one stream (argument 1, as the program printed it, 0x...).
With a second argument N, exits 1 unless that count is N: what a recording of
tests/gpu/triton_step.py N must show."""
import json
import sys

stream = int(sys.argv[1], 16)
trace = json.load(sys.stdin)
launches = sum(
    int(e.get("count", 0))
    for rank in trace["ranks"]
    for e in rank["events"]
    if e.get("kind") == "cuda" and e.get("op") == "kernels" and int(str(e.get("stream", "0")), 16) == stream
)
print(f"{launches} kernel launches counted on stream {stream:#x}")
sys.exit(0 if len(sys.argv) < 3 or launches == int(sys.argv[2]) else 1)
