// Flush-denormal mode: PyTorch's torch.set_flush_denormal. Denormal floats (below ~1.2e-38
// in float32) take a microcode assist on x86, ~100x a normal operation; a model trained far
// into convergence (momentum buffers of gradients near 1e-40) can spend most of its step on
// them. With the mode on, the CPU's FTZ and DAZ bits make such results and operands zero.
//
// PyTorch sets the bits on the calling thread only. sloth's kernels run on the thread that
// syncs and on the CPU pool's workers, so the setting is process-wide: each of those threads
// brings its own control register up to date before it runs work (sync_float_env), for the
// price of one relaxed load and a thread-local compare.
#pragma once

namespace sloth {

// Turns the mode on or off for every thread that runs sloth kernels; returns whether this CPU
// supports it (x86 with SSE, AArch64), as torch.set_flush_denormal does. Off is the default.
bool set_flush_denormal(bool on);
// Whether the mode is on (set_flush_denormal(true) succeeded last).
bool flush_denormal();

namespace internal {
// Applies the current mode to the calling thread if it has not seen the latest setting.
void sync_float_env();
}  // namespace internal

}  // namespace sloth
