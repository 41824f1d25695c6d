"""Reads `replay dump --json` on stdin and counts, per rank, the NCCL
operations on device buffers and their completions. Exits 1 unless there are
some, every one completed and no error was recorded: what a recording of
bench/nccl_allreduce_sweep --resets must show, where each device reset
destroys the context the recorder's events and buffers lived in."""
import json
import sys

trace = json.load(sys.stdin)
ops = completions = errors = 0
for rank in trace["ranks"]:
    for e in rank["events"]:
        kind = e.get("kind")
        if kind == "op" and str(e.get("api", "")).startswith("nccl") and int(e.get("flags", 0)) & 1024:
            ops += 1
        elif kind == "completion" and str(e.get("api", "")).startswith("nccl"):
            completions += 1
        elif kind == "error":
            errors += 1
            print("error:", json.dumps(e, sort_keys=True))
print(f"{ops} device operations, {completions} completions, {errors} errors")
sys.exit(0 if ops > 0 and completions == ops and errors == 0 else 1)
