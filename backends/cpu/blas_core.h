// OpenBLAS's kernel set ("core"), chosen once per process before sloth's first GEMM.
#pragma once

namespace sloth::cpu {

// Makes sure the BLAS runs the best kernels for this CPU (SLOTH_BLAS_CORE, core/settings.h):
// when OPENBLAS_CORETYPE forces a core narrower than the CPU's AVX-512, OpenBLAS is asked to
// detect its core again without the variable; when its detection (with or without the
// variable) picks no AVX-512 core on an AVX-512 CPU (an unknown CPU model, as virtual machines
// report), SkylakeX is named. OPENBLAS_CORETYPE is left as it was. Runs once (thread-safe; later calls return at
// once); does nothing with a BLAS that lacks OpenBLAS's dynamic-arch entry points.
void ensure_blas_core();

// Holds OpenBLAS at one thread (once): sloth's pool splits the work and calls the BLAS
// from its tasks.
void blas_single_threaded();

// The BLAS's core name now ("Cooperlake", "Haswell", ...), or "" when it cannot say.
const char* blas_core_name();

}  // namespace sloth::cpu
