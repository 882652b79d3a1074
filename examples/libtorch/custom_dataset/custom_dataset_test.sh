#!/bin/bash
# Runs the cpp/custom-dataset port (10 iterations, as the original: AlexNet at 224x224, SGD
# lr 0.001 momentum 0.5) on a generated two-class dataset (8 train and 4 test images per
# class) and checks what it prints: 10 test lines, finite losses, and the train and test losses
# of the last iteration below those of the first.
set -euo pipefail
make_dataset="$1"
port="$2"
dir="$(mktemp -d "${TEST_TMPDIR:-/tmp}/custom_dataset.XXXXXX")"
"$make_dataset" "$dir" 8 4
here="$(pwd)"
cd "$dir"
"$here/$port" > out.txt
cat out.txt
awk -F'\t' '
  /^Train Epoch/ { split($2, a, ": "); train[++nt] = a[2] + 0 }
  /^Test Loss/ { split($1, a, ": "); test[++ns] = a[2] + 0 }
  END {
    if (ns != 10 || nt != 10) { print "expected 10 train and 10 test lines, got " nt " and " ns; exit 1 }
    printf "train loss %.4f -> %.4f, test loss %.4f -> %.4f\n", train[1], train[10], test[1], test[10]
    for (i = 1; i <= 10; ++i) if (!(test[i] == test[i]) || !(train[i] == train[i])) { print "NaN loss"; exit 1 }
    if (!(train[10] < train[1])) { print "train loss did not fall"; exit 1 }
    if (!(test[10] < test[1])) { print "test loss did not fall"; exit 1 }
  }' out.txt
