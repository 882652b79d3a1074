"""Compiler flags sloth's own libraries set whatever the consumer's compilation mode."""

# A consumer workspace that follows the README builds in Bazel's default fastbuild mode (no
# -O flag: gcc's -O0), and a dependency's .bazelrc is never read, so sloth's tensor library,
# IR, scheduler and autograd would run unoptimized (6-16x slower in the LibTorch ports).
# These targets add -O2 in fastbuild; opt builds keep their own flags (-O2, or sloth's .bazelrc
# -O3), dbg builds stay unoptimized for debugging, and --config=asan (fastbuild with
# --define=sloth_sanitize=1) keeps its -O1. The CPU kernels (backends/cpu) always set -O3
# -mavx2 -mfma themselves.
SLOTH_OPT_COPTS = select({
    "//:fastbuild_sanitized": [],
    "//:fastbuild": ["-O2"],
    "//conditions:default": [],
})
