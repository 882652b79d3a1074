// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a
// counter-based generator, so element i of rand(shape) depends only on (seed, offset + i) —
// never on threads, tiling or fusion. Every backend and the reference kernels use this file.
#pragma once

#include <cmath>
#include <cstdint>

namespace sloth::philox {

struct Out { uint32_t x[4]; };

inline Out philox4x32_10(uint64_t counter, uint64_t key) {
  uint32_t c0 = static_cast<uint32_t>(counter), c1 = static_cast<uint32_t>(counter >> 32);
  uint32_t c2 = 0, c3 = 0;
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int r = 0; r < 10; ++r) {
    uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    c1 = static_cast<uint32_t>(p1);
    c3 = static_cast<uint32_t>(p0);
    c0 = n0;
    c2 = n2;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

// Uniform in [0, 1) with 24 (float) or 53 (double) random bits.
inline double uniform(uint64_t seed, uint64_t index, bool f64) {
  Out o = philox4x32_10(index, seed);
  if (!f64) return static_cast<double>(o.x[0] >> 8) * (1.0 / 16777216.0);
  uint64_t bits = (static_cast<uint64_t>(o.x[0]) << 32 | o.x[1]) >> 11;
  return static_cast<double>(bits) * (1.0 / 9007199254740992.0);
}

// Standard normal by Box-Muller on two uniforms of the same counter.
inline double normal(uint64_t seed, uint64_t index) {
  Out o = philox4x32_10(index, seed);
  double u1 = (static_cast<double>(o.x[0]) + 1.0) * (1.0 / 4294967296.0);  // (0, 1]
  double u2 = static_cast<double>(o.x[1]) * (1.0 / 4294967296.0);          // [0, 1)
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
}

// Integer in [low, high).
inline int64_t integer(uint64_t seed, uint64_t index, int64_t low, int64_t high) {
  Out o = philox4x32_10(index, seed);
  uint64_t bits = static_cast<uint64_t>(o.x[0]) << 32 | o.x[1];
  return low + static_cast<int64_t>(bits % static_cast<uint64_t>(high - low));
}

}  // namespace sloth::philox
