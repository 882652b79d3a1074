#!/usr/bin/env bash
# Side-by-side: LibTorch eager (Debian libtorch-dev, C++) vs sloth on workloads 2-4 of issue 5
# and on issue 13's models (CNN training step, transformer block training step, conv2d layers).
#   benchmarks/compare.sh            (or: bazel run //benchmarks:compare)
# Environment knobs:
#   THREADS=<n>        thread count for both sides (default: nproc, which is what sloth's pool uses)
#   MODEL_THREADS="1 2"  thread counts of the model rows; each runs both sides at that count
#                      (sloth: SLOTH_NUM_THREADS and OPENBLAS_NUM_THREADS; LibTorch:
#                      at::set_num_threads)
#   SKIP_BASE=1        only the model rows (skips the workloads of issue 5)
#   EPOCH_MODELS="mlp cnn"  whole training epochs of train_fashion_mnist (mlp: the README's main
#                      job) against tools/fashion_mnist.py (PyTorch eager, Python) at each of
#                      PT_THREADS="1 2" (its best counts), interleaved, EPOCH_REPS times; "" skips
#   EPOCHS=<n>         epochs per run (default 1; the mean train time per epoch is compared)
#   REPS=<n>           sloth benchmark repetitions (median reported; default 5)
#   LT_MIN_S=<s>       LibTorch seconds per workload (median over all reps in that time; default 3)
#   BAZEL_STARTUP="--output_base=/tmp/ob_bench"   extra bazel startup options
#   WORKDIR=<dir>      where the LibTorch binary and raw results go (default /tmp/sloth_compare)
# OPENBLAS_* and OMP_* are taken from the environment unchanged, for both sides.
set -euo pipefail

ROOT="${BUILD_WORKSPACE_DIRECTORY:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
cd "$ROOT"
THREADS="${THREADS:-$(nproc)}"
REPS="${REPS:-5}"
MODEL_THREADS="${MODEL_THREADS:-1 2}"
SKIP_BASE="${SKIP_BASE:-0}"
LT_MIN_S="${LT_MIN_S:-3}"
EPOCH_MODELS="${EPOCH_MODELS-mlp cnn}"
PT_THREADS="${PT_THREADS:-1 2}"
EPOCH_REPS="${EPOCH_REPS:-1}"
EPOCHS="${EPOCHS:-1}"
WORKDIR="${WORKDIR:-/tmp/sloth_compare}"
BAZEL="${BAZEL:-bazel}"
read -r -a STARTUP <<< "${BAZEL_STARTUP:-}"
mkdir -p "$WORKDIR"

if [[ "$THREADS" != "$(nproc)" ]]; then
  echo "note: sloth's CPU pool uses all $(nproc) hardware threads; THREADS=$THREADS only applies to LibTorch" >&2
fi

# ---- 1. libtorch-dev ----
if [[ ! -f /usr/include/torch/csrc/api/include/torch/torch.h || ! -e /usr/lib/x86_64-linux-gnu/libtorch.so ]]; then
  echo "== installing libtorch-dev (apt-get) ==" >&2
  SUDO=""; [[ "$(id -u)" != 0 ]] && SUDO="sudo"
  $SUDO apt-get install -y libtorch-dev || { $SUDO apt-get update && $SUDO apt-get install -y libtorch-dev; }
fi

# ---- 2. LibTorch program (g++ directly; not a Bazel target) ----
SRC="$ROOT/benchmarks/libtorch_workloads.cc"
LTBIN="$WORKDIR/libtorch_workloads"
if [[ ! -x "$LTBIN" || "$SRC" -nt "$LTBIN" ]]; then
  echo "== building $LTBIN ==" >&2
  g++ -O3 -std=c++17 -o "$LTBIN" "$SRC" \
    -I/usr/include/torch/csrc/api/include \
    -L/usr/lib/x86_64-linux-gnu -ltorch -ltorch_cpu -lc10 -pthread
fi

# ---- 3. sloth benchmarks ----
# The model benchmarks come from several files; a row whose benchmark binary is not in this tree
# is skipped (and said so) instead of failing the whole comparison.
# name:filter of each model benchmark binary.
MODEL_BENCHES=("cnn_bench:^BM_CnnTrainStep" "transformer_bench:^BM_TransformerBlockStep"
               "conv_bench:^BM_Conv2dForward")
PRESENT=()
for mb in "${MODEL_BENCHES[@]}"; do
  b="${mb%%:*}"
  if grep -q "name = \"$b\"" benchmarks/BUILD; then PRESENT+=("$mb")
  else echo "note: //benchmarks:$b is not in this tree; its rows are skipped" >&2; fi
done
TARGETS=()
if [[ "$SKIP_BASE" != 1 ]]; then
  TARGETS+=(//benchmarks:elementwise_bench //benchmarks:ops_bench //benchmarks:train_bench)
fi
for mb in "${PRESENT[@]}"; do TARGETS+=("//benchmarks:${mb%%:*}"); done
[[ -n "$EPOCH_MODELS" ]] && TARGETS+=(//examples:train_fashion_mnist)
echo "== building sloth benchmarks ==" >&2
"$BAZEL" "${STARTUP[@]}" build -c opt "${TARGETS[@]}" >&2
BIN="$("$BAZEL" "${STARTUP[@]}" info -c opt bazel-bin 2>/dev/null)/benchmarks"

COMMON=(--benchmark_repetitions="$REPS" --benchmark_report_aggregates_only=true
        --benchmark_format=console)
rm -f "$WORKDIR"/libtorch.txt "$WORKDIR"/libtorch_models_t*.txt "$WORKDIR"/*.json "$WORKDIR"/epochs.txt
if [[ "$SKIP_BASE" != 1 ]]; then
  echo "== LibTorch eager ($THREADS threads) ==" >&2
  "$LTBIN" "$THREADS" "$LT_MIN_S" | tee "$WORKDIR/libtorch.txt" >&2

  echo "== sloth ==" >&2
  "$BIN/elementwise_bench" "${COMMON[@]}" --benchmark_out="$WORKDIR/elementwise.json" --benchmark_out_format=json >&2
  "$BIN/ops_bench" "${COMMON[@]}" --benchmark_out="$WORKDIR/ops.json" --benchmark_out_format=json >&2
  "$BIN/train_bench" "${COMMON[@]}" --benchmark_out="$WORKDIR/train.json" --benchmark_out_format=json >&2
fi

# Model rows: both sides at each thread count of MODEL_THREADS, one after the other.
for t in $MODEL_THREADS; do
  echo "== models, $t thread(s): LibTorch eager ==" >&2
  "$LTBIN" "$t" "$LT_MIN_S" models | tee "$WORKDIR/libtorch_models_t$t.txt" >&2
  echo "== models, $t thread(s): sloth ==" >&2
  for mb in "${PRESENT[@]}"; do
    b="${mb%%:*}"
    SLOTH_NUM_THREADS="$t" OPENBLAS_NUM_THREADS="$t" "$BIN/$b" "${COMMON[@]}" \
      --benchmark_filter="${mb#*:}" --benchmark_out="$WORKDIR/models_t${t}_$b.json" \
      --benchmark_out_format=json >&2 || echo "warning: $b failed at $t thread(s)" >&2
  done
done

# Whole epochs: sloth's example and PyTorch's script, interleaved rep by rep. Each line of
# epochs.txt: "<model> <side> <seconds per epoch>".
if [[ -n "$EPOCH_MODELS" ]]; then
  EX="$BIN/../examples/train_fashion_mnist"
  for rep in $(seq "$EPOCH_REPS"); do
    for m in $EPOCH_MODELS; do
      echo "== epoch of $m (rep $rep): sloth ==" >&2
      s=$("$EX" --model="$m" --epochs="$EPOCHS" --checkpoint="$WORKDIR/epoch_$m.safetensors" \
            | tee /dev/stderr | sed -n 's/^time per epoch: \([0-9.]*\)s.*/\1/p')
      echo "$m sloth ${s:-nan}" >> "$WORKDIR/epochs.txt"
      for t in $PT_THREADS; do
        echo "== epoch of $m (rep $rep): PyTorch eager, $t thread(s) ==" >&2
        s=$(/usr/bin/python3 "$ROOT/tools/fashion_mnist.py" --model "$m" --epochs "$EPOCHS" --threads "$t" \
              | tee /dev/stderr | sed -n 's/^mean train time per epoch: \([0-9.]*\) s.*/\1/p')
        echo "$m pytorch_t$t ${s:-nan}" >> "$WORKDIR/epochs.txt"
      done
    done
  done
fi

# ---- 4. one table ----
python3 - "$WORKDIR" "$THREADS" "$MODEL_THREADS" "$SKIP_BASE" <<'PY'
import glob, json, sys, re, os
wd, threads, model_threads, skip_base = sys.argv[1], sys.argv[2], sys.argv[3].split(), sys.argv[4] == "1"
lt = {}
for path in glob.glob(os.path.join(wd, "libtorch*.txt")):
    for line in open(path):
        if line.startswith("#") or not line.strip():
            continue
        name, med, mn, reps = line.split()
        lt[name] = float(med)
to_ms = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}
sl, extra = {}, {}
def read_bench(path, suffix=""):
    for b in json.load(open(path))["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = re.sub(r"/(min_time:[^/]*|real_time|manual_time|process_time)", "", b["run_name"])
        sl[name + suffix] = b["real_time"] * to_ms[b["time_unit"]]
        extra[name + suffix] = b
for f in ("elementwise.json", "ops.json", "train.json"):
    if os.path.exists(os.path.join(wd, f)):
        read_bench(os.path.join(wd, f))
for t in model_threads:
    for path in glob.glob(os.path.join(wd, f"models_t{t}_*.json")):
        read_bench(path, f"@t{t}")
# sloth's chains: jit:1 is the run-time compiled kernel (the default once a kernel is hot);
# jit:0 (the tile interpreter) is printed below the table.
rows = [(f"chain k={k} (16M f32)", f"chain_k{k}", f"BM_SlothChain/k:{k}/jit:1") for k in (1, 2, 4, 8, 16)]
rows += [("relu(a*b+c)*d-e/2 (16M f32)", "chain6", "BM_SlothChain6/jit:1"),
         ("softmax [4096,1024]", "softmax_4096x1024", "BM_Softmax"),
         ("layer_norm [4096,1024]", "layer_norm_4096x1024", "BM_LayerNorm"),
         ("matmul 1024x1024", "matmul_1024", "BM_MatmulSloth/n:1024"),
         # nn::MLP + optim::SGD, as users write it (LibTorch's side is the same, with
         # torch::nn::Linear and torch::optim::SGD); "raw": the hand-written reference.
         ("MLP 784-1024-1024-10 b256 step", "mlp_b256", "BM_TrainMlp/batch:256"),
         ("  same, raw sloth ops", "mlp_b256", "BM_TrainMlpRaw/batch:256"),
         ("MLP 784-1024-1024-10 b32 step", "mlp_b32", "BM_TrainMlp/batch:32"),
         ("  same, raw sloth ops", "mlp_b32", "BM_TrainMlpRaw/batch:32"),
         ("  same, sloth::jit (replayed)", "mlp_b32", "BM_TrainMlpJit/batch:32"),
         ("tiny MLP 32-64-64-1 b16 step", "tiny_mlp_b16", "BM_TrainTinyMlp/batch:16"),
         ("  same, raw sloth ops", "tiny_mlp_b16", "BM_TrainTinyMlpRaw/batch:16"),
         ("  same, sloth::jit (replayed)", "tiny_mlp_b16", "BM_TrainTinyMlpJit/batch:16"),
         # Denormals flushed on both sides (train_bench.cc: the step trains into them).
         ("tiny MLP b16 step, flush denormal", "tiny_mlp_b16_ftz", "BM_TrainTinyMlpFtz/batch:16"),
         ("  same, sloth::jit (replayed)", "tiny_mlp_b16_ftz", "BM_TrainTinyMlpJitFtz/batch:16"),
         ("tiny MLP b16 step, 64-batch dataset", "tiny_mlp_b16_data", "BM_TrainTinyMlpData/batch:16"),
         ("  same, sloth::jit (replayed)", "tiny_mlp_b16_data", "BM_TrainTinyMlpJitData/batch:16")]
def fmt(ms):
    if ms is None: return "n/a"
    return f"{ms*1e3:.1f} us" if ms < 1 else f"{ms:.2f} ms"
# Issue 13's models at each thread count. A sloth key may list alternatives (the first
# present wins); a row whose benchmark did not run prints "n/a" for sloth.
model_rows = [("CNN step b128 (fashion_mnist cnn)", "cnn_step_b128",
               ["BM_CnnTrainStep/batch:128", "BM_CnnTrainStep"]),
              ("transformer block step d128 T64 b32", "transformer_block_step",
               ["BM_TransformerBlockStep"])]
for i, shape in ((0, "1->32 28x28"), (1, "32->64 14x14")):
    for kind, lk, sk in (("fwd", "conv2d_fwd", "BM_Conv2dForward"),
                         ("fwd+bwd", "conv2d_fwdbwd", "BM_Conv2dForwardBackward")):
        model_rows.append((f"conv2d {shape} b128 {kind}", f"{lk}_layer{i}",
                           [f"{sk}/layer:{i}", f"{sk}/{i}"]))
for t in model_threads:
    for label, lk, sks in model_rows:
        sk = next((k for k in sks if f"{k}@t{t}" in sl), sks[0])
        rows.append((f"{label} t{t}", f"{lk}_t{t}", f"{sk}@t{t}"))
print(f"\nthreads={threads} (model rows: the t<n> in their name)  "
      f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE','(unset)')}  "
      f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY','(unset)')}  medians")
hdr = f"{'workload':40} {'LibTorch':>12} {'sloth':>12} {'LibTorch/sloth':>15}"
print(hdr); print("-" * len(hdr))
for label, lk, sk in rows:
    a, b = lt.get(lk), sl.get(sk)
    if a is None and b is None and (skip_base and "@t" not in sk):
        continue
    r = f"{a/b:.2f}x" if a and b else "n/a"
    print(f"{label:40} {fmt(a):>12} {fmt(b):>12} {r:>15}")
ep = {}
if os.path.exists(os.path.join(wd, "epochs.txt")):
    for line in open(os.path.join(wd, "epochs.txt")):
        m, side, v = line.split()
        if v != "nan":
            ep.setdefault((m, side), []).append(float(v))
if ep:
    med = lambda v: sorted(v)[len(v) // 2]
    print("\nWhole epochs (train time per epoch, medians): train_fashion_mnist vs "
          "tools/fashion_mnist.py (PyTorch eager, Python), PyTorch at its fastest thread count")
    for m, label in (("mlp", "main job: MLP 784-256-128-10 b128"), ("cnn", "CNN --model=cnn b128")):
        pts = {side: med(v) for (mm, side), v in ep.items() if mm == m and side.startswith("pytorch")}
        sv = ep.get((m, "sloth"))
        if not pts or not sv:
            continue
        best_side = min(pts, key=pts.get)
        a, b = pts[best_side], med(sv)
        others = ", ".join(f"{k[8:]} {v:.2f} s" for k, v in sorted(pts.items()))
        print(f"{label:40} {a:>10.2f} s {b:>10.2f} s {a / b:>14.2f}x   (PyTorch {others})")
print("\nratio > 1: sloth is faster.  Same-binary references (sloth side):")
for k in ("BM_StreamTriad/threads:1", "BM_StreamTriad/threads:2"):
    if k in extra:
        print(f"  STREAM triad {k[-9:]}: {extra[k]['bytes_per_second']/1e9:.1f} GB/s")
for k in [r[2] for r in rows[:6]]:
    for v in (k, k.replace("jit:1", "jit:0")):
        if v in extra:
            print(f"  {v}: {extra[v]['bytes_per_second']/1e9:.1f} GB/s")
if "BM_MatmulCblas/n:1024" in sl and "BM_MatmulSloth/n:1024" in sl:
    print(f"  cblas_sgemm 1024: {fmt(sl['BM_MatmulCblas/n:1024'])}  (sloth matmul / cblas = "
          f"{sl['BM_MatmulSloth/n:1024']/sl['BM_MatmulCblas/n:1024']:.3f})")
for k in ("BM_TrainMlp/batch:256", "BM_TrainMlp/batch:32"):
    if k in extra and "ideal_ms" in extra[k]:
        print(f"  {k}: GEMM-bound ideal {extra[k]['ideal_ms']:.2f} ms, step/ideal = "
              f"{sl[k]/extra[k]['ideal_ms']:.2f}")
PY
