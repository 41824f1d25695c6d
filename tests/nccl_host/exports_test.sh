#!/bin/sh
# exports_test.sh LIB NCCL_H: the stand-in exports what real NCCL (built with
# PROFAPI) exports, for every function nccl.h declares: ncclX as a weak symbol and
# pncclX as a strong one; and nothing but nccl*/pnccl* symbols.
set -eu
lib=$1
header=$2
symbols=$(nm -D --defined-only "$lib")
status=0
for p in $(grep -o 'pnccl[A-Za-z0-9_]*' "$header" | sort -u); do
  f=${p#p}
  echo "$symbols" | grep -q " W $f\$" || { echo "missing weak $f"; status=1; }
  echo "$symbols" | grep -q " T $p\$" || { echo "missing strong $p"; status=1; }
done
others=$(echo "$symbols" | awk '{print $NF}' | grep -v '^p\?nccl' || true)
if [ -n "$others" ]; then
  echo "exports beyond nccl*/pnccl*:"
  echo "$others"
  status=1
fi
count=$(echo "$symbols" | grep -c ' W nccl' || true)
echo "$count functions, each a weak ncclX with a strong pncclX"
exit $status
