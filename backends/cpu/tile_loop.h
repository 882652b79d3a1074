// The tile loop of the tile interpreter (tile_program.h): over the tiles of one chunk of the
// loop space, load the operands' tiles and run every step, or hand the tile to the compiled
// kernel; then write the outputs and feed a fused reduction's sink. A template over the sink,
// included by tile_run.cc and tile_reduce.cc only.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/tile_program.h"

namespace sloth::cpu {
namespace tile_loop {

inline void stream_copy(char* dst, const char* src, size_t bytes) {
  size_t k = 0;
  if ((reinterpret_cast<uintptr_t>(dst) & 31) == 0) {
    for (; k + 32 <= bytes; k += 32)
      _mm256_stream_si256(reinterpret_cast<__m256i*>(dst + k),
                          _mm256_load_si256(reinterpret_cast<const __m256i*>(src + k)));
  }
  if (k < bytes) std::memcpy(dst + k, src + k, bytes - k);
}

}  // namespace tile_loop

template <typename SinkF>
void TileProgram::run_chunk(int64_t begin, int64_t end, const Bind& b, SinkF* sink,
                            TileFn jit) const {
  // Large outputs bypass the cache (non-temporal stores): no write-allocate read of the
  // destination, and the inputs of the next tiles are not evicted. Results are computed
  // into L1 registers, then streamed.
  const bool stream = out_bytes_ >= kStreamBytes;
  // The compiled path runs every load before any computing step, so the interpreter's
  // register sharing (by step order) does not hold there: it has a layout of its own.
  const std::vector<int>& reg_of = jit ? jit_regs_ : interp_regs_;
  char* regs =
      scratch_registers(static_cast<size_t>(jit ? num_jit_regs_ : num_regs_) * kRegStride);
  void* p[256];
  std::vector<void*> heap;
  void** ptrs = p;
  if (vals_.size() > 256) {
    heap.resize(vals_.size());
    ptrs = heap.data();
  }
  for (size_t v = 0; v < vals_.size(); ++v)
    ptrs[v] = reg_of[v] >= 0 ? regs + reg_of[v] * kRegStride : nullptr;
  const int64_t fill_n = std::min(kTile, end - begin);
  // The compiled loop reads a constant's first element only (ew_codegen.cc); the interpreter
  // and the reduction sink read whole tiles.
  for (size_t c = 0; c < consts_.size(); ++c) {
    const int v = consts_[c].val;
    tile::fill(ptrs[v], vals_[v].dtype, b.cv[c], jit != nullptr && v != sink_ ? 1 : fill_n);
  }
  const Bound* bound = b.bound.data();
  // The compiled loop gives every loaded operand its own register and only reads it: an
  // operand broadcast from one element (a learning rate) is filled once per chunk, not per
  // tile, and so is one repeating with a period that divides kTile (a bias broadcast over
  // rows) when the chunk starts at a multiple of it: every tile then starts at one too
  // (kTile apart) and holds a prefix of the same elements.
  auto once = [begin](const Bound& x) {
    return x.splat || (x.period > 0 && begin % x.period == 0);
  };
  // The compiled path's loads of every tile (the others ran above), listed once per chunk:
  // `once` costs a division per operand, and a small program runs a single tile.
  int tile_loads_small[32];
  std::vector<int> tile_loads_heap;
  int* tile_loads = tile_loads_small;
  size_t num_tile_loads = 0;
  if (jit != nullptr) {
    if (load_steps_.size() > 32) {
      tile_loads_heap.resize(load_steps_.size());
      tile_loads = tile_loads_heap.data();
    }
    for (int k : load_steps_) {
      const Bound& x = bound[steps_[k].ext];
      if (once(x)) x.load(x.args, begin, fill_n, ptrs[steps_[k].out]);
      else tile_loads[num_tile_loads++] = k;
    }
  }
  char* const* outp = b.outp.data();
  const size_t nouts = outs_.size();
  // Operands read linearly are prefetched kPrefetchTiles tiles ahead: each step reads its
  // operand tile in one short burst, too short for the hardware prefetchers to keep
  // several streams in flight, so without this every burst waits on DRAM latency.
  const int64_t pf = kPrefetchTiles * kTile;
  const size_t nexts = exts_.size();
  for (int64_t t = begin; t < end; t += kTile) {
    const int64_t n = std::min(kTile, end - t);
    if (pf > 0 && t + pf < end) {
      const int64_t pn = std::min(kTile, end - t - pf);
      for (size_t e = 0; e < nexts; ++e) {
        const Bound& x = bound[e];
        if (!x.linear) continue;
        const char* p0 = x.args.base + (t + pf) * x.src_size;
        const char* p1 = p0 + pn * x.src_size;
        for (const char* q = p0; q < p1; q += 64) _mm_prefetch(q, _MM_HINT_T0);
      }
    }
    if (!stream)
      for (size_t o = 0; o < nouts; ++o) ptrs[outs_[o].val] = outp[o] + t * out_es_[o];
    auto load = [&](const Step& s) {
      const Bound& x = bound[s.ext];
      const char* src = x.args.base + t * x.src_size;
      if (x.direct) ptrs[s.out] = const_cast<char*>(src);
      else if (x.linear) x.conv(ptrs[s.out], src, n);
      else x.load(x.args, t, n, ptrs[s.out]);
    };
    if (jit != nullptr) {  // loads as interpreted, then every computing step in one loop
      for (size_t j = 0; j < num_tile_loads; ++j) load(steps_[tile_loads[j]]);
      jit(ptrs, n);
    } else {
      for (const Step& s : steps_) {
        switch (s.kind) {
          case Kind::kLoad:
            load(s);
            break;
          case Kind::kConvert:
            s.conv(ptrs[s.out], ptrs[s.in[0]], n);
            break;
          case Kind::kOp:
            s.fn(ptrs[s.out], s.in[0] >= 0 ? ptrs[s.in[0]] : nullptr,
                 s.in[1] >= 0 ? ptrs[s.in[1]] : nullptr, s.in[2] >= 0 ? ptrs[s.in[2]] : nullptr,
                 n);
            break;
        }
      }
    }
    if (stream)
      for (size_t o = 0; o < nouts; ++o)
        tile_loop::stream_copy(outp[o] + t * out_es_[o],
                               static_cast<const char*>(ptrs[outs_[o].val]), n * out_es_[o]);
    if constexpr (!std::is_same_v<SinkF, NoSink>) (*sink)(ptrs[sink_], t, n);
  }
  if (stream) _mm_sfence();
}

}  // namespace sloth::cpu
