#include "core/settings.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace sloth {
namespace {

// The variable's value, or nullptr when it is unset.
const char* env(const char* name) { return std::getenv(name); }

std::string env_str(const char* name) {
  const char* v = env(name);
  return v ? v : "";
}

// Unset or anything but "0" is on.
bool env_on_unless_0(const char* name) {
  const char* v = env(name);
  return v == nullptr || std::strcmp(v, "0") != 0;
}

Settings from_env() {
  Settings s;
  s.log = env_str("SLOTH_LOG");
  s.profile = env_str("SLOTH_PROFILE");
  s.dump_ir = env("SLOTH_DUMP_IR") != nullptr;
  s.fusion = env_on_unless_0("SLOTH_FUSION");
  s.row_groups = env_on_unless_0("SLOTH_ROW_GROUPS");
  s.frozen_runs = env_on_unless_0("SLOTH_FROZEN");
  if (const char* v = env("SLOTH_NUM_THREADS"); v && std::atoi(v) > 0) s.num_threads = std::atoi(v);
  if (const char* v = env("SLOTH_POOL_SPIN_US"); v && *v) s.pool_spin_us = std::max<int64_t>(0, std::atoll(v));
  s.small_gemm = env_on_unless_0("SLOTH_SMALL_GEMM");
  if (const char* v = env("SLOTH_BLAS_CORE"); v && std::strcmp(v, "env") == 0)
    s.blas_core = Settings::BlasCore::kEnv;
  if (const char* v = env("SLOTH_TILE")) {
    const int64_t t = std::atoll(v);
    if (t >= 64 && t <= 16384 && (t & (t - 1)) == 0) s.tile = t;
  }
  if (const char* v = env("SLOTH_PREFETCH_TILES"))
    s.prefetch_tiles = std::max<int64_t>(0, std::atoll(v));
  if (const char* v = env("SLOTH_STREAM_MB")) s.stream_mb = std::atoll(v);
  if (const char* v = env("SLOTH_EW_ISA"); v && std::strcmp(v, "avx512") == 0)
    s.ew_isa = Isa::kAvx512;
  if (const char* v = env("SLOTH_JIT"); v && *v) {
    const std::string j(v);
    if (j == "0" || j == "off") s.jit = Settings::Jit::kOff;
    else if (j == "sync") s.jit = Settings::Jit::kSync;
  }
  if (const char* v = env("SLOTH_JIT_ISA"); v && std::strcmp(v, "avx2") == 0)
    s.jit_isa = Isa::kAvx2;
  s.jit_cxx = env_str("SLOTH_JIT_CXX");
  s.jit_dir = env_str("SLOTH_JIT_DIR");
  s.cuda_cache_dir = env_str("SLOTH_CUDA_CACHE_DIR");
  s.cuda_arch = env_str("SLOTH_CUDA_ARCH");
  if (const char* v = env("SLOTH_DIST_MPI")) s.dist_mpi = std::strcmp(v, "1") == 0;
  if (const char* v = env("SLOTH_DIST_CHECK")) s.dist_check = v[0] == '1';
  if (const char* v = env("SLOTH_DIST_TIMEOUT"); v && std::atof(v) > 0)
    s.dist_timeout_s = std::atof(v);
  return s;
}

}  // namespace

bool Settings::log_on(std::string_view topic) const {
  return log == "all" || log.find(topic) != std::string::npos;
}

Settings& settings_for_test() {
  static Settings s = from_env();
  return s;
}

const Settings& settings() { return settings_for_test(); }

}  // namespace sloth
