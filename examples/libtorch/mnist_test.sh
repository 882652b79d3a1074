#!/bin/bash
# Runs the cpp/mnist port (10 epochs, as the original) on generated IDX files in ./data and
# checks what it prints: the test loss falls from epoch 1 to epoch 10 and the last accuracy
# reaches the committed bound.
set -euo pipefail
make_idx="$1"
mnist="$2"
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/mnist.XXXXXX")"
mkdir -p "$dir/data"
"$make_idx" "$dir/data" 1920 500
here="$(pwd)"
cd "$dir"
"$here/$mnist" | tr '\r' '\n' > out.txt
cat out.txt
awk -F'[:|]' '/^Test set/ { loss[++n] = $3 + 0; acc[n] = $5 + 0 }
  END {
    if (n != 10) { print "expected 10 test lines, got " n; exit 1 }
    printf "epoch 1: loss %.4f acc %.3f; epoch 10: loss %.4f acc %.3f\n", loss[1], acc[1], loss[10], acc[10]
    if (!(loss[10] < loss[1])) { print "test loss did not fall"; exit 1 }
    if (!(loss[10] < 0.10)) { print "epoch 10 test loss above 0.10"; exit 1 }
    if (!(acc[10] >= 0.97)) { print "epoch 10 accuracy below 0.97"; exit 1 }
  }' out.txt
