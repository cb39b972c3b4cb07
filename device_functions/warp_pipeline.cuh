// warp_pipeline.cuh: a warp streams chunks of 32 consecutive packed items (a small
// matrix each, and optionally a vector) through shared memory while its lanes work on
// the previous chunk in registers, one item per lane: the thread designs of LU
// (factorizations/lu.cu) and Cholesky (factorizations/cholesky.cu).
//
// Why: a lane that loads its own packed matrix reads at a stride of the matrix's size
// from its neighbours, so every load instruction of the warp touches 32 segments.  The
// warp instead copies the chunk's one contiguous run (32 * len elements) with cp.async,
// coalesced whatever the matrices' orientation, and each lane then reads its own slot
// from shared memory.  The next chunk's copy is in flight while the lanes compute on
// the current one (one chunk ahead: measured on the H100, LU's thread design ran the
// same with one to four chunks ahead; it is bound by its dependent arithmetic, not by
// the copies' latency).  Outputs leave the same way, as contiguous runs.
//
// Items:    item b's matrix is at a_src + b * len_a (len_a elements, in whatever order the
//           kernel reads them), its vector (when len_b > 0 and b_src is not null) at
//           b_src + b * len_b.
// Shared:   per warp warp_pipe_elems(len_a, len_b, out_a, late) elements of T, in the
//           dynamic shared memory: the A ring (one buffer; two when the matrices' outputs
//           leave through it, out_a, unless `late`) and, when len_b > 0, the B ring (two
//           buffers: the current one carries the vector outputs out).  A buffer holds 32
//           lane slots of len | 1 elements: odd, so that the lanes' reads of their own
//           slots fall on distinct banks.  `late` (out_a with one A buffer, for large
//           matrices whose second buffer would leave too few warps per SM): the next
//           chunk's copies start only when this chunk's outputs have left (flush_a), so
//           the warp's own copies do not overlap its arithmetic; other warps' do.  The
//           kernel takes the double-buffered pipeline when the launch's dynamic shared
//           memory holds it, else the late one, else none (the body then reads and
//           writes global memory itself): the launcher chooses by the size it gives.
// Threads:  every lane of the warp runs warp_pipeline with the same arguments and takes
//           the same turns (chunks first, first + step, ...; a 64-bit index).  The body
//           calls turn.loaded() once, after the lane has read its slots, then flush_a
//           once when the pipeline's out_a is set, and may call flush_b once; every lane
//           calls them (they synchronize the warp).
// Sync:     __syncwarp only; nothing across warps.
// Memory:   a_src and b_src are read once; items >= count are neither read nor written.
#pragma once
#include "common.cuh"
#include "layouts.cuh"
#include "stage.cuh"

namespace bdf {

__host__ __device__ constexpr long long warp_pipe_slots(int len) { return 32ll * (len | 1); }
__host__ __device__ constexpr long long warp_pipe_elems(int len_a, int len_b, bool out_a, bool late) {
  return (out_a && !late ? 2 : 1) * warp_pipe_slots(len_a) + (len_b > 0 ? 2 * warp_pipe_slots(len_b) : 0);
}

// The dynamic shared memory this launch was given (PTX %dynamic_smem_size).
__device__ __forceinline__ unsigned dynamic_smem_bytes() {
  unsigned bytes;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(bytes));
  return bytes;
}

// Copy between `items` packed items of `len` elements (one run at g) and a warp's slots
// of `slot` elements (item q at s + q * slot), consecutive lanes on consecutive global
// elements.  TO_SHARED: cp.async (issued, not committed or waited for); otherwise plain
// loads from shared memory and stores to global memory.  Every lane of the warp calls
// it; no division per element.
template <bool TO_SHARED, typename T>
__device__ __forceinline__ void warp_copy(T* g, int items, int len, int slot, T* s, int lane) {
  const int total = items * len, dq = 32 / len, dr = 32 - dq * len;
  int q = lane / len, r = lane - q * len;
  for (int e = lane; e < total; e += 32) {
    if constexpr (TO_SHARED) copy_async(s + q * slot + r, g + e);
    else g[e] = s[q * slot + r];
    r += dr;
    q += dq;
    if (r >= len) {
      r -= len;
      ++q;
    }
  }
}

template <typename T> struct WarpPipe {
  T* sa = nullptr;  // this warp's A ring (null: the pipeline is off)
  T* sb = nullptr;  // its B ring (null when len_b == 0)
  const T* a_src = nullptr;
  const T* b_src = nullptr;  // null: vectors are not copied in (the B ring may still carry outputs)
  int len_a = 0, len_b = 0;
  bool out_a = false;
  bool late = false;  // one A buffer although out_a: the next chunk is fetched by flush_a
  __device__ bool on() const { return sa != nullptr; }
  // cp.async of chunk c's items (those below count) into A buffer a and B buffer b, one group
  __device__ void fetch(long long c, long long count, T* a, T* b, int lane) const {
    const long long b0 = c * 32;
    const int items = count - b0 < 32 ? int(count - b0) : 32;
    warp_copy<true>(const_cast<T*>(a_src) + b0 * len_a, items, len_a, len_a | 1, a, lane);
    if (b_src) warp_copy<true>(const_cast<T*>(b_src) + b0 * len_b, items, len_b, len_b | 1, b, lane);
    stage_commit();
  }
};

// The pipeline of warp `warp` of `warps` (len_a > 0; len_b 0 for none): double-buffered
// when the launch's dynamic shared memory holds warps * warp_pipe_elems(..., false), else
// late when it holds that of `late` (only different with out_a), else off.
template <typename T>
__device__ WarpPipe<T> warp_pipe(unsigned char* smem, int warp, int warps, const T* a_src, int len_a,
                                 const T* b_src, int len_b, bool out_a) {
  WarpPipe<T> p;
  const long long have = dynamic_smem_bytes() / (long long)sizeof(T) / warps;
  if (len_a <= 0 || have < warp_pipe_elems(len_a, len_b, out_a, true)) return p;
  p.late = have < warp_pipe_elems(len_a, len_b, out_a, false);
  const long long per_warp = warp_pipe_elems(len_a, len_b, out_a, p.late);
  p.sa = reinterpret_cast<T*>(smem) + warp * per_warp;
  p.sb = len_b > 0 ? p.sa + (out_a && !p.late ? 2 : 1) * warp_pipe_slots(len_a) : nullptr;
  p.a_src = a_src;
  p.b_src = len_b > 0 ? b_src : nullptr;
  p.len_a = len_a;
  p.len_b = len_b;
  p.out_a = out_a;
  return p;
}

// The thread designs' pipeline (LU and Cholesky kernels): on when A is one packed run of
// m x n matrices (a uniform accessor with ld = m and stride = m n, 1 <= m, n <= NB; off
// for any other accessor).  The matrices' outputs `out` leave through it when `write` and
// they are packed the same way; the one right-hand side (one_rhs: m elements) comes in
// through it when B is packed, and its solutions leave through the B ring (stage_x) when
// X is packed too.
template <int NB, typename T, class Mat, class Vec>
__device__ __forceinline__ WarpPipe<T> packed_warp_pipe(unsigned char* smem, int warp, int warps, const Mat& A,
                                                        const Mat& out, bool write, bool one_rhs, const Vec& B,
                                                        const Vec& X, bool& stage_x) {
  WarpPipe<T> pipe;
  stage_x = false;
  if constexpr (is_uniform_matrix<Mat>::value) {
    const int vm = int(A.m), vn = int(A.n), len = vm * vn;
    if (vm >= 1 && vm <= NB && vn >= 1 && vn <= NB && A.ld == vm && A.stride == len) {
      const int len_b = one_rhs ? vm : 0;
      const bool out_a = write && out.ld == out.m && out.stride == len;
      const bool in_b = len_b > 0 && B.inc == 1 && B.stride == len_b;
      pipe = warp_pipe<T>(smem, warp, warps, A.base, len, in_b ? B.base : nullptr, len_b, out_a);
      stage_x = pipe.sb && X.inc == 1 && X.stride == len_b;
    }
  }
  return pipe;
}

// One warp's turn on one chunk.
template <typename T> struct WarpTurn {
  const WarpPipe<T>& p;
  long long b0;   // the chunk's first item (this lane's item: b0 + lane)
  int items;      // items in the chunk (32 but for the last one)
  int lane;
  T* a;           // this lane's A slot (null when the pipeline is off)
  T* b;           // this lane's B slot (null when off or len_b == 0)
  T* abuf;        // the chunk's buffers, and those the next chunk goes to
  T* bbuf;
  T* a_next;
  T* b_next;
  long long next, count;
  // Every lane has read its slots: the next chunk's copies start (without out_a they
  // overwrite this chunk's A buffer), unless late.
  __device__ __forceinline__ void loaded() const {
    if (!p.on()) return;
    __syncwarp();
    if (!p.late && next * 32 < count) p.fetch(next, count, a_next, b_next, lane);
  }
  // The chunk's A buffer (out_a) / B buffer, written by every lane, to dst as one run;
  // when late, the next chunk's copies start once the A buffer has been read.
  __device__ __forceinline__ void flush_a(T* dst) const {
    __syncwarp();
    warp_copy<false>(dst, items, p.len_a, p.len_a | 1, abuf, lane);
    if (p.late && next * 32 < count) {
      __syncwarp();
      p.fetch(next, count, a_next, b_next, lane);
    }
  }
  __device__ __forceinline__ void flush_b(T* dst) const {
    __syncwarp();
    warp_copy<false>(dst, items, p.len_b, p.len_b | 1, bbuf, lane);
  }
};

// Runs body(const WarpTurn<T>&) on chunks first, first + step, ... of `count` items.
template <typename T, class Body>
__device__ __forceinline__ void warp_pipeline(const WarpPipe<T>& p, long long count, long long first, long long step,
                                              int lane, Body body) {
  const long long chunks = (count + 31) / 32;
  const long long slots_a = warp_pipe_slots(p.len_a), slots_b = warp_pipe_slots(p.len_b);
  int cur_a = 0, cur_b = 0;  // ring positions
  if (p.on() && first < chunks) p.fetch(first, count, p.sa, p.sb, lane);
  for (long long c = first; c < chunks; c += step) {
    const long long b0 = c * 32;
    const int items = count - b0 < 32 ? int(count - b0) : 32;
    T* abuf = nullptr;
    T* bbuf = nullptr;
    T* a_next = nullptr;
    T* b_next = nullptr;
    if (p.on()) {
      stage_wait<0>();  // this lane's copies of the chunk
      __syncwarp();     // ... and every other lane's
      abuf = p.sa + cur_a * slots_a;
      a_next = p.out_a && !p.late ? p.sa + (cur_a ^ 1) * slots_a : abuf;
      if (p.sb) {
        bbuf = p.sb + cur_b * slots_b;
        b_next = p.sb + (cur_b ^ 1) * slots_b;
      }
    }
    const WarpTurn<T> turn{p,    b0,     items,  lane,   abuf ? abuf + lane * (p.len_a | 1) : nullptr,
                           bbuf ? bbuf + lane * (p.len_b | 1) : nullptr, abuf, bbuf, a_next, b_next,
                           c + step, count};
    body(turn);
    if (p.out_a && !p.late) cur_a ^= 1;
    cur_b ^= 1;
  }
}

// The right-hand sides of a thread design (one item per lane, n <= NB unknowns): each of
// nrhs in registers, solved by solve(x) unless `keep` (a failed factorization: LAPACK
// leaves X = B).  The one staged right-hand side (the pipeline's b_src) is read from this
// lane's B slot; with stage_x its solution goes back there and the chunk's solutions
// leave as one run.  Otherwise column rhs of item b is B.vector(b) + rhs * b_col (step
// B.inc) in and the same of X out.  Every lane of the warp calls it (flush_b).
template <int NB, typename T, class Vec, class Solve>
__device__ __forceinline__ void warp_pipe_solves(const WarpTurn<T>& t, bool active, int n, int nrhs, const Vec& B,
                                                 long long b_col, const Vec& X, long long x_col, bool stage_x,
                                                 bool keep, Solve solve) {
  const long long b = t.b0 + t.lane;
  const bool staged_b = t.p.b_src != nullptr;
  for (int rhs = 0; rhs < nrhs; ++rhs) {
    T x[NB];
#pragma unroll
    for (int i = 0; i < NB; ++i) x[i] = T(0);
    if (active) {
      const T* bv = staged_b ? t.b : B.vector(b) + rhs * b_col;
      const long long inc = staged_b ? 1 : B.inc;
#pragma unroll
      for (int i = 0; i < NB; ++i)
        if (i < n) x[i] = bv[i * inc];
      if (!keep) solve(x);
      T* xv = stage_x ? t.b : X.vector(b) + rhs * x_col;
      const long long inc_x = stage_x ? 1 : X.inc;
#pragma unroll
      for (int i = 0; i < NB; ++i)
        if (i < n) xv[i * inc_x] = x[i];
    }
    if (stage_x) t.flush_b(X.vector(t.b0));
  }
}

}  // namespace bdf

