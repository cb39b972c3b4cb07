// gemm.cuh: one BLK_M x BLK_N tile of op(A) op(B) for ONE matrix product,
// computed by one thread group through tiles staged in shared memory.
//
// Threads:  a ThreadGroup<DIM_X * DIM_Y>; thread (tx, ty) owns the outputs
//           (tx + p * DIM_X, ty + q * DIM_Y), p < BLK_M / DIM_X, q < BLK_N / DIM_Y.
// Shared:   caller passes sA with gemm_smem_a<BLK_M, BLK_K>() and sB with
//           gemm_smem_b<BLK_N, BLK_K>() elements of T (one group's worth);
//           contents undefined on exit.
// Sync:     no barrier assumed on entry; two barriers per BLK_K step; ends after a barrier.
// Memory:   A, B read-only (column-major, leading dimensions lda, ldb), only inside
//           op(A) m x k and op(B) k x n; out-of-range tile elements are zero in
//           shared memory, never loaded.  store(i, j, r) is called once per
//           output (i < m, j < n), by the thread that owns it.
// Failure:  none; NaN/Inf propagate as in BLAS.
#pragma once
#include "common.cuh"
#include "stage.cuh"

namespace bdf {

// One padding element per row keeps the transposed tile loads free of bank conflicts.
template <int BLK_M, int BLK_K> __host__ __device__ constexpr int gemm_smem_a() { return BLK_K * (BLK_M + 1); }
template <int BLK_N, int BLK_K> __host__ __device__ constexpr int gemm_smem_b() { return BLK_K * (BLK_N + 1); }

// Stage op(X)(r, c) for r < R_TILE, c < C_TILE (origin r0, c0; extent rows x cols)
// into s[c * (R_TILE + 1) + r].  Consecutive threads take consecutive addresses
// of X: along r when op keeps X's orientation, along c when op transposes it.
template <int R_TILE, int C_TILE, int GROUP, typename T>
__device__ __forceinline__ void gemm_stage(int rank, const T* __restrict__ X, long long ldx, int op,
                                           int r0, int c0, int rows, int cols, T* s) {
  const bool trans = op_transposes(op), cj = op_conjugates(op);
#pragma unroll
  for (int e0 = 0; e0 < R_TILE * C_TILE; e0 += GROUP) {
    const int e = e0 + rank;
    if (R_TILE * C_TILE % GROUP != 0 && e >= R_TILE * C_TILE) break;
    const int r = trans ? e / C_TILE : e % R_TILE;
    const int c = trans ? e % C_TILE : e / R_TILE;
    const int gr = r0 + r, gc = c0 + c;
    T v = T(0);
    if (gr < rows && gc < cols)
      v = conj_if(trans ? X[gc + gr * ldx] : X[gr + gc * ldx], cj);
    s[c * (R_TILE + 1) + r] = v;
  }
}

// Tile (i0, j0) of op(A) op(B), with op(A) m x k and op(B) k x n.
template <typename T, int DIM_X, int DIM_Y, int BLK_M, int BLK_N, int BLK_K, class Store>
__device__ void gemm_tile(ThreadGroup<DIM_X * DIM_Y> g, int m, int n, int k, int i0, int j0,
                          const T* __restrict__ A, long long lda, int opA,
                          const T* __restrict__ B, long long ldb, int opB,
                          T* sA, T* sB, Store store) {
  static_assert(BLK_M % DIM_X == 0 && BLK_N % DIM_Y == 0, "tile must split evenly over threads");
  constexpr int G = DIM_X * DIM_Y, P = BLK_M / DIM_X, Qn = BLK_N / DIM_Y;
  const int tx = g.rank % DIM_X, ty = g.rank / DIM_X;
  T acc[P][Qn];
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int q = 0; q < Qn; ++q) acc[p][q] = T(0);

  for (int kk = 0; kk < k; kk += BLK_K) {
    g.sync();  // the previous step's tiles are no longer read
    // sA[kc * (BLK_M + 1) + i] = op(A)(i0 + i, kk + kc)
    gemm_stage<BLK_M, BLK_K, G>(g.rank, A, lda, opA, i0, kk, m, k, sA);
    // sB[kr * (BLK_N + 1) + j] = op(B)(kk + kr, j0 + j): op(B)^T staged like A
    // (opB ^ 1 swaps N<->T and C<->R).
    gemm_stage<BLK_N, BLK_K, G>(g.rank, B, ldb, opB ^ 1, j0, kk, n, k, sB);
    g.sync();
#pragma unroll 4
    for (int kc = 0; kc < BLK_K; ++kc) {
      T a[P], b[Qn];
#pragma unroll
      for (int p = 0; p < P; ++p) a[p] = sA[kc * (BLK_M + 1) + tx + p * DIM_X];
#pragma unroll
      for (int q = 0; q < Qn; ++q) b[q] = sB[kc * (BLK_N + 1) + ty + q * DIM_Y];
#pragma unroll
      for (int p = 0; p < P; ++p)
#pragma unroll
        for (int q = 0; q < Qn; ++q) acc[p][q] += a[p] * b[q];
    }
  }
  g.sync();
#pragma unroll
  for (int p = 0; p < P; ++p)
#pragma unroll
    for (int q = 0; q < Qn; ++q) {
      const int i = i0 + tx + p * DIM_X, j = j0 + ty + q * DIM_Y;
      if (i < m && j < n) store(i, j, acc[p][q]);
    }
}

// ---------------------------------------------------------------------------
// gemm_tile_mma: gemm_tile for T = double (and complex<double>: see CPLX below) on FP64 tensor cores (sm_90:
// mma.sync m16n8kK, K = 4, 8 or 16).
//
// Why a second tile function: gemm_tile is bound by shared-memory loads (one
// per FMA) and waits for each step's loads before computing.  Here the warps
// of the group each own a (BLK_M / WARPS_M) x (BLK_N / WARPS_N) block of the
// output in 16x8 mma tiles (0.5 bytes of shared memory per FMA for a 32x32
// warp block), and the operand tiles are staged by cp.async into 2 to 4
// buffers (gemm_mma_stages), so later steps load while step kk computes.
// Measured on an H100 (bench/gemm.py --sweep, n = 256 and 512): m16n8k4 takes
// 0.7x the time of m8n8k4 for the same tile, and m16n8k8 a further 0.95x;
// issued instructions, not FMAs, bound these sizes, so the fragment offsets
// are compile-time constants (one copy of the tile per operand orientation)
// and the staging uses 16-byte copies without bound checks where it can
// (ncu: 594 -> 322 M instructions at n = 512; cuBLAS 248 M).
//
// Shared layout: each operand tile is stored in its global orientation, so
// the staging writes and the fragment reads are both free of bank conflicts:
// op(X) not transposed (X's columns are contiguous): s[c * (R + 4) + r];
// transposed: s[r * (BLK_K + 4) + c], for row r < R of op(A) (or column of
// op(B)) and c < BLK_K along k.  A row stride of 4 mod 16 doubles spreads the
// 8 x 4 fragment over the 16 eight-byte banks of a half warp.
// Fragments (PTX ISA), with g = lane / 4, t = lane % 4 and q < K / 4:
//   a[2q] = A(g, t + 4q), a[2q + 1] = A(g + 8, t + 4q);  b[q] = B(t + 4q, g);
//   c[h] = C(g, 2t + h), c[2 + h] = C(g + 8, 2t + h).
// (Any k-order consistent between a and b gives the same sum; the row and
// column positions are what the layout fixes.)
//
// Threads:  a ThreadGroup<32 * WARPS_M * WARPS_N> (whole warps).
// Shared:   caller passes s with gemm_mma_smem<BLK_M, BLK_N, BLK_K, STAGES>() doubles,
//           16-byte aligned (one group's worth); contents undefined on exit.
// Sync:     one barrier on entry, one per BLK_K step (two with 2 buffers);
//           ends after a barrier.
// Memory, Failure: as gemm_tile (out-of-range elements are zero-filled by the
//           copy itself, never read).
template <int R, int BLK_K, int PAD = 4> __host__ __device__ constexpr int gemm_mma_operand() {
  return BLK_K * (R + PAD) > R * (BLK_K + PAD) ? BLK_K * (R + PAD) : R * (BLK_K + PAD);
}
// Doubles of one buffer's A and B tiles.  CPLX (complex<double>, see gemm_tile_mma):
// A is staged as BLK_M complex rows by BLK_K / 2 complex columns in either orientation,
// its column runs padded by 8 (2 BLK_M + 8 = 8 mod 16 doubles apart: the fragment's
// two column pairs land on different banks), B as BLK_N / 2 by BLK_K / 2 complex.
template <int BLK_M, int BLK_K, bool CPLX> __host__ __device__ constexpr int gemm_mma_operand_a() {
  return CPLX ? gemm_mma_operand<2 * BLK_M, BLK_K / 2, 8>() : gemm_mma_operand<BLK_M, BLK_K>();
}
template <int BLK_N, int BLK_K, bool CPLX> __host__ __device__ constexpr int gemm_mma_operand_b() {
  return CPLX ? gemm_mma_operand<BLK_N, BLK_K / 2>() : gemm_mma_operand<BLK_N, BLK_K>();
}
// Buffers of the cp.async pipeline: STAGES when given (2 or more), else as
// many as 48 KiB holds, 2 to 4.  A setting names its own count where fewer
// buffers let more blocks share an SM (the 32 x 32 tile: two hold all of
// k = 32); past 48 KiB the launcher opts in to more dynamic shared memory.
template <int BLK_M, int BLK_N, int BLK_K, int STAGES = 0, bool CPLX = false>
__host__ __device__ constexpr int gemm_mma_stages() {
  constexpr int stage = (gemm_mma_operand_a<BLK_M, BLK_K, CPLX>() + gemm_mma_operand_b<BLK_N, BLK_K, CPLX>()) * 8;
  return STAGES >= 2 ? STAGES : 48 * 1024 / stage >= 4 ? 4 : 48 * 1024 / stage >= 3 ? 3 : 2;
}
// Doubles of the whole pipeline (the caller's s).
template <int BLK_M, int BLK_N, int BLK_K, int STAGES = 0, bool CPLX = false>
__host__ __device__ constexpr int gemm_mma_smem() {
  return gemm_mma_stages<BLK_M, BLK_N, BLK_K, STAGES, CPLX>() *
         (gemm_mma_operand_a<BLK_M, BLK_K, CPLX>() + gemm_mma_operand_b<BLK_N, BLK_K, CPLX>());
}

// The warp grid of gemm_tile_mma for a group of W warps: 2 x W/2 (1 x 1 for one warp).
__host__ __device__ constexpr int mma_warps_m(int warps) { return warps >= 2 ? 2 : 1; }

template <class T> struct is_double { static constexpr bool value = false; };
template <> struct is_double<double> { static constexpr bool value = true; };

// Issue the copies of op(X)(r0 + r, c0 + c), r < R, c < BLK_K, into s in the
// layout above; op(X) is rows x cols, column-major X with leading dimension ldx.
// A "line" is a run of the tile contiguous in X (a column of op(X) when not
// TRANS, a row when TRANS) and in s.  Consecutive threads take consecutive
// VEC-element pieces of a line; each thread then steps over lines, so its
// source advances by a constant.  VEC = 2 (16-byte copies) needs X 16-byte
// aligned and ldx even.  full: the whole tile lies inside op(X), so no copy
// needs a bound check.
template <int R, int BLK_K, int G, bool TRANS, int VEC, int PAD>
__device__ __forceinline__ void gemm_mma_stage_by(int rank, const double* __restrict__ X, long long ldx,
                                               int r0, int c0, int rows, int cols, bool full, double* s) {
  constexpr int LINE = TRANS ? BLK_K : R, LINES = TRANS ? R : BLK_K, PITCH = LINE + PAD;
  constexpr int PER_LINE = LINE / VEC, STEP = G / PER_LINE, COPIES = LINES / STEP;
  static_assert(LINE % VEC == 0 && G % PER_LINE == 0 && LINES % STEP == 0, "the group covers whole lines");
  const int u = rank % PER_LINE * VEC, v = rank / PER_LINE;       // position in the line, first line
  const int u0 = TRANS ? c0 : r0, v0 = TRANS ? r0 : c0;           // tile origin along / across lines
  const int u_end = TRANS ? cols : rows, v_end = TRANS ? rows : cols;
  const double* src = X + (u0 + u) + (long long)(v0 + v) * ldx;
  double* dst = s + v * PITCH + u;
  if (full) {
#pragma unroll
    for (int i = 0; i < COPIES; ++i) copy_async_zfill<8 * VEC>(dst + i * STEP * PITCH, src + i * STEP * ldx, 8 * VEC);
  } else {
    const int inside = u_end - (u0 + u);  // elements of this piece inside the line
    const int bytes = inside <= 0 ? 0 : inside >= VEC ? 8 * VEC : 8 * inside;
#pragma unroll
    for (int i = 0; i < COPIES; ++i)
      copy_async_zfill<8 * VEC>(dst + i * STEP * PITCH, src + i * STEP * ldx,
                                v0 + v + i * STEP < v_end ? bytes : 0);
  }
}

// gemm_mma_stage_by with 16-byte copies when vec, else 8-byte ones (vec is
// uniform over the group); lines PAD doubles longer than the tile's run.
template <int R, int BLK_K, int G, bool TRANS, int PAD = 4>
__device__ __forceinline__ void gemm_mma_stage(bool vec, int rank, const double* __restrict__ X, long long ldx,
                                               int r0, int c0, int rows, int cols, bool full, double* s) {
  if (vec)
    gemm_mma_stage_by<R, BLK_K, G, TRANS, 2, PAD>(rank, X, ldx, r0, c0, rows, cols, full, s);
  else
    gemm_mma_stage_by<R, BLK_K, G, TRANS, 1, PAD>(rank, X, ldx, r0, c0, rows, cols, full, s);
}

// x with its sign bit xor-ed with bit 31 of mask (one integer op on the high word).
__device__ __forceinline__ double flip_sign(double x, unsigned mask) {
  return __hiloint2double(__double2hiint(x) ^ (int)mask, __double2loint(x));
}

// acc += a b on one 16x8 tile: the mma.sync of depth K.
template <int K> __device__ __forceinline__ void mma_16x8(double (&c)[4], const double (&a)[K / 2],
                                                         const double (&b)[K / 4]) {
  if constexpr (K == 4) {
    asm volatile("mma.sync.aligned.m16n8k4.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
                 "{%0, %1, %2, %3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(b[0]));
  } else if constexpr (K == 8) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(b[0]), "d"(b[1]));
  } else {
    static_assert(K == 16, "m16n8k4, m16n8k8 or m16n8k16");
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f64.f64.f64.f64 {%0, %1, %2, %3}, "
                 "{%4, %5, %6, %7, %8, %9, %10, %11}, {%12, %13, %14, %15}, {%0, %1, %2, %3};\n"
                 : "+d"(c[0]), "+d"(c[1]), "+d"(c[2]), "+d"(c[3])
                 : "d"(a[0]), "d"(a[1]), "d"(a[2]), "d"(a[3]), "d"(a[4]), "d"(a[5]), "d"(a[6]), "d"(a[7]),
                   "d"(b[0]), "d"(b[1]), "d"(b[2]), "d"(b[3]));
  }
}

// The tile for one orientation of the staged operands (TA: op(A) transposed;
// TB: op(B) not transposed, as op(B)^T is staged): every shared-memory offset
// of a fragment is then a constant, so the loads carry it as an immediate
// (with runtime strides, ptxas spent an integer multiply-add per load and the
// kernel issued 2.4x cuBLAS's instructions for the same products).
//
// CPLX: complex<double> products on the same real mma tiles.  A complex row of
// op(A) with its k entries split into (re, im) pairs is a real row of length 2k,
// and a complex column of the output is the real column pair (re, im), so
//   [Re C(i, j), Im C(i, j)] = sum_l [Re a, Im a](i, l) [[Re b, Im b], [-Im b, Re b]](l, j):
// a real product of m x 2k by 2k x 2n whose second operand is never stored: lane
// (g, t) of a b fragment reads component (t xor g) & 1 of b(l, j) and negates it where
// t is odd and g even.  The staged tiles are the operands' own memory (a complex
// element is two doubles), BLK_M x BLK_K / 2 of op(A) and BLK_K / 2 x BLK_N / 2 of
// op(B) in complex elements; the real tile is BLK_M x BLK_N, so a complex output
// tile is BLK_M x BLK_N / 2 and c[2h], c[2h + 1] of a lane are one complex element.
// Conjugating ops negate the imaginary components as they are read.  The same mma
// count per real tile, four real products per complex one.  Here m, n, k, j0 and the
// leading dimensions are complex; A and B are the operands' memory as doubles.
template <int WARPS_M, int WARPS_N, int BLK_M, int BLK_N, int BLK_K, int SHAPE_K, int STAGES, bool TA, bool TB,
          bool CPLX, class Store>
__device__ __forceinline__ void gemm_tile_mma_oriented(
    ThreadGroup<32 * WARPS_M * WARPS_N> g, int m, int n, int k, int i0, int j0,
    const double* __restrict__ A, long long lda, bool conj_a, const double* __restrict__ B, long long ldb,
    bool conj_b, double* s, Store store) {
  constexpr int G = 32 * WARPS_M * WARPS_N;
  constexpr int TM = BLK_M / 16 / WARPS_M, TN = BLK_N / 8 / WARPS_N;  // 16x8 tiles per warp
  static_assert(BLK_M % (16 * WARPS_M) == 0 && BLK_N % (8 * WARPS_N) == 0 && BLK_K % SHAPE_K == 0,
                "the tile must split into 16 x 8 x SHAPE_K mma steps over the warps");
  static_assert(!CPLX || (BLK_N % 2 == 0 && BLK_K % 2 == 0), "complex tiles pair real columns and k entries");
  constexpr int SA = gemm_mma_operand_a<BLK_M, BLK_K, CPLX>(), SB = gemm_mma_operand_b<BLK_N, BLK_K, CPLX>();
  // Real element (r, c) of the staged A tile (row r, k index c) at r * A_RS + (c / 2) * A_K2
  // + (c % 2) * A_C1; of B (k index r, column c) at (c / 8) * B_Y8 + .. (see b_frag).
  // Complex A not transposed: runs along the rows, one a complex column, (re, im) pairs.
  constexpr int A_PITCH = CPLX ? (TA ? BLK_K + 4 : 2 * BLK_M + 8) : (TA ? BLK_K + 4 : BLK_M + 4);
  constexpr int A_RS = TA ? A_PITCH : CPLX ? 2 : 1;
  constexpr int A_C1 = TA || CPLX ? 1 : A_PITCH;
  constexpr int A_K2 = TA ? 2 : CPLX ? A_PITCH : 2 * A_PITCH;
  constexpr int B_PITCH = TB ? BLK_K + 4 : BLK_N + 4;
  // B's offset per 8 real columns (a y step) and per 2 real k entries.
  constexpr int B_Y8 = TB ? (CPLX ? 4 : 8) * B_PITCH : 8;
  constexpr int B_K2 = TB ? 2 : CPLX ? B_PITCH : 2 * B_PITCH;
  const int lane = g.rank % 32, warp = g.rank / 32;
  const int wm = warp % WARPS_M, wn = warp / WARPS_M;
  const int gq = lane / 4, tq = lane % 4;
  const int a_row = wm * TM * 16 + gq;
  const int a_frag = CPLX ? a_row * A_RS + (tq / 2) * A_K2 + (tq % 2) * A_C1 : a_row * A_RS + tq * A_C1;
  int b_frag;
  unsigned sign_b = 0;  // the bit that negates a b entry's high word (CPLX)
  if constexpr (CPLX) {
    const int comp = (tq ^ gq) & 1;  // re or im of b(l, j)
    const int col = 4 * wn * TN + gq / 2;  // the complex column of op(B) within the tile
    b_frag = TB ? col * B_PITCH + (tq / 2) * 2 + comp : (tq / 2) * B_PITCH + 2 * col + comp;
    // The embedding's -Im b, conj(B)'s -Im b, and conj(A)'s -Im a: a lane hands the mma
    // a and b entries of the same k parity (t odd: the imaginary parts of a), so
    // negating its b entries negates those products as negating its a entries would.
    const bool negative = ((tq & 1) && !(gq & 1)) != (conj_b && comp);
    sign_b = negative != (conj_a && (tq & 1)) ? 0x80000000u : 0u;
  } else {
    const int col = wn * TN * 8 + gq;
    b_frag = TB ? col * B_PITCH + tq : tq * B_PITCH + col;
  }

  double acc[TM][TN][4];
#pragma unroll
  for (int x = 0; x < TM; ++x)
#pragma unroll
    for (int y = 0; y < TN; ++y)
#pragma unroll
      for (int h = 0; h < 4; ++h) acc[x][y][h] = 0.0;

  // Pipeline of S buffers.  S = 2: step + 1 is issued before waiting for
  // step, so a second barrier must follow the products.  S >= 3: after the
  // barrier of step, the buffer of step - 1 is free for step + S - 1, so one
  // barrier per step keeps S - 1 steps in flight.
  constexpr int S = gemm_mma_stages<BLK_M, BLK_N, BLK_K, STAGES, CPLX>();
  constexpr int KS = CPLX ? BLK_K / 2 : BLK_K;  // k entries of the operands a step
  const int steps = (k + KS - 1) / KS;
  // 16-byte copies where the operand allows them (a uniform choice per call).
  const bool vec_a = ((reinterpret_cast<unsigned long long>(A) | (unsigned long long)lda * 8) & 15) == 0;
  const bool vec_b = ((reinterpret_cast<unsigned long long>(B) | (unsigned long long)ldb * 8) & 15) == 0;
  const bool inside_a = i0 + BLK_M <= m, inside_b = j0 + (CPLX ? BLK_N / 2 : BLK_N) <= n;
  auto stage = [&](int step) {  // always commits, possibly an empty group
    if (step < steps) {
      double* sa = s + (step % S) * (SA + SB);
      const int kk = step * KS;
      const bool full_k = kk + KS <= k;
      if constexpr (!CPLX) {
        gemm_mma_stage<BLK_M, BLK_K, G, TA>(vec_a, g.rank, A, lda, i0, kk, m, k, inside_a && full_k, sa);
        gemm_mma_stage<BLK_N, BLK_K, G, TB>(vec_b, g.rank, B, ldb, j0, kk, n, k, inside_b && full_k, sa + SA);
      } else {  // the complex tiles as real ones of the operands' doubles (lines of (re, im) pairs)
        if constexpr (TA)
          gemm_mma_stage<BLK_M, BLK_K, G, true>(vec_a, g.rank, A, lda, i0, 2 * kk, m, 2 * k, inside_a && full_k, sa);
        else
          gemm_mma_stage<2 * BLK_M, BLK_K / 2, G, false, 8>(vec_a, g.rank, A, lda, 2 * i0, kk, 2 * m, k,
                                                            inside_a && full_k, sa);
        if constexpr (TB)
          gemm_mma_stage<BLK_N / 2, BLK_K, G, true>(vec_b, g.rank, B, ldb, j0, 2 * kk, n, 2 * k, inside_b && full_k,
                                                    sa + SA);
        else
          gemm_mma_stage<BLK_N, BLK_K / 2, G, false>(vec_b, g.rank, B, ldb, 2 * j0, kk, 2 * n, k,
                                                     inside_b && full_k, sa + SA);
      }
    }
    stage_commit();
  };
  g.sync();  // the caller's (or the previous tile's) use of s is over
#pragma unroll
  for (int p = 0; p < S - 1; ++p) stage(p);
  for (int step = 0; step < steps; ++step) {
    if constexpr (S == 2) {
      stage(step + 1);
      stage_wait<1>();
    } else {
      stage_wait<S - 2>();
    }
    g.sync();  // every thread's copies of this step have landed
    if constexpr (S > 2) stage(step + S - 1);
    const double* sa = s + (step % S) * (SA + SB) + a_frag;
    const double* sb = s + (step % S) * (SA + SB) + SA + b_frag;
#pragma unroll
    for (int kk = 0; kk < BLK_K; kk += SHAPE_K) {
      double a[TM][SHAPE_K / 2], b[TN][SHAPE_K / 4];
#pragma unroll
      for (int x = 0; x < TM; ++x)
#pragma unroll
        for (int j = 0; j < SHAPE_K / 2; ++j)
          a[x][j] = sa[(x * 16 + 8 * (j % 2)) * A_RS + ((kk + 4 * (j / 2)) / 2) * A_K2];
#pragma unroll
      for (int y = 0; y < TN; ++y)
#pragma unroll
        for (int q = 0; q < SHAPE_K / 4; ++q) {
          b[y][q] = sb[y * B_Y8 + ((kk + 4 * q) / 2) * B_K2];
          // an integer xor of the sign bit, not a multiply by -1 (H100, one process:
          // ZGEMM 128 145.4 us against 148.5, 256 250.7 against 260.7, 512 486 against 508)
          if constexpr (CPLX) b[y][q] = flip_sign(b[y][q], sign_b);
        }
#pragma unroll
      for (int y = 0; y < TN; ++y)
#pragma unroll
        for (int x = 0; x < TM; ++x) mma_16x8<SHAPE_K>(acc[x][y], a[x], b[y]);
    }
    if constexpr (S == 2) g.sync();  // this buffer is restaged by the next step
  }
  stage_wait<0>();  // only empty groups remain; leave none behind
  g.sync();
  const int i_lane = i0 + a_row;
  if constexpr (CPLX) {
    // c[2h], c[2h + 1]: re and im of the complex element (row g + 8 h, column t).
    const int j_lane = j0 + 4 * wn * TN + tq;
#pragma unroll
    for (int x = 0; x < TM; ++x)
#pragma unroll
      for (int y = 0; y < TN; ++y)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int i = i_lane + x * 16 + 8 * h, j = j_lane + y * 4;
          if (i < m && j < n) store(i, j, acc[x][y][2 * h], acc[x][y][2 * h + 1]);
        }
  } else {
    // A warp block of 32 or more accumulators stores an interior tile without
    // bound tests: straight-line stores let the compiler share each column's
    // address among its rows (with the tests every element recomputed its 64-bit
    // address in its own branch).  H100, 256 MB of operands: DGEMM 128 101.6 us
    // against 105.2, 64 94.4 against 95.0, 256 143.6 against 147.1.  Smaller warp
    // blocks keep the tests: there the hoisted addresses cost registers (the
    // 32 x 32 tile spilled, DGEMM 32 with beta = 1 took 165-180 us against 160).
    constexpr bool STRAIGHT = TM * TN * 4 >= 32;
    const int j_lane = j0 + wn * TN * 8 + 2 * tq;
    if (STRAIGHT && i0 + BLK_M <= m && j0 + BLK_N <= n) {
#pragma unroll
      for (int y = 0; y < TN; ++y)
#pragma unroll
        for (int h = 0; h < 4; ++h)
#pragma unroll
          for (int x = 0; x < TM; ++x)
            store(i_lane + x * 16 + 8 * (h / 2), j_lane + y * 8 + h % 2, acc[x][y][h]);
    } else {
#pragma unroll
      for (int x = 0; x < TM; ++x)
#pragma unroll
        for (int y = 0; y < TN; ++y)
#pragma unroll
          for (int h = 0; h < 4; ++h) {
            const int i = i_lane + x * 16 + 8 * (h / 2), j = j_lane + y * 8 + h % 2;
            if (i < m && j < n) store(i, j, acc[x][y][h]);
          }
    }
  }
}

// The four orientations (a branch uniform over the group), each its own inlined tile.
template <int WARPS_M, int WARPS_N, int BLK_M, int BLK_N, int BLK_K, int SHAPE_K, int STAGES, bool CPLX,
          class Store>
__device__ __forceinline__ void gemm_tile_mma_dispatch(ThreadGroup<32 * WARPS_M * WARPS_N> g, int m, int n, int k,
                                                       int i0, int j0, const double* A, long long lda, int opA,
                                                       const double* B, long long ldb, int opB, double* s,
                                                       Store store) {
  // op(B)^T is staged like op(A): its rows are op(B)'s columns (N <-> T).
  const bool ta = op_transposes(opA), tb = !op_transposes(opB);
  const bool ca = CPLX && op_conjugates(opA), cb = CPLX && op_conjugates(opB);
  if (ta && tb)
    gemm_tile_mma_oriented<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, true, true, CPLX>(
        g, m, n, k, i0, j0, A, lda, ca, B, ldb, cb, s, store);
  else if (ta)
    gemm_tile_mma_oriented<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, true, false, CPLX>(
        g, m, n, k, i0, j0, A, lda, ca, B, ldb, cb, s, store);
  else if (tb)
    gemm_tile_mma_oriented<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, false, true, CPLX>(
        g, m, n, k, i0, j0, A, lda, ca, B, ldb, cb, s, store);
  else
    gemm_tile_mma_oriented<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, false, false, CPLX>(
        g, m, n, k, i0, j0, A, lda, ca, B, ldb, cb, s, store);
}

template <int WARPS_M, int WARPS_N, int BLK_M, int BLK_N, int BLK_K, int SHAPE_K, int STAGES, class Store>
__device__ void gemm_tile_mma(ThreadGroup<32 * WARPS_M * WARPS_N> g, int m, int n, int k, int i0, int j0,
                              const double* __restrict__ A, long long lda, int opA,
                              const double* __restrict__ B, long long ldb, int opB,
                              double* s, Store store) {
  gemm_tile_mma_dispatch<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, false>(
      g, m, n, k, i0, j0, A, lda, opA, B, ldb, opB, s, store);
}

// complex<double>: the real BLK_M x BLK_N tile computes a BLK_M x BLK_N / 2 complex
// tile (i0, j0, m, n, k and the leading dimensions in complex elements); store(i, j,
// re, im).  s holds gemm_mma_smem<BLK_M, BLK_N, BLK_K, STAGES, true>() doubles.
template <int WARPS_M, int WARPS_N, int BLK_M, int BLK_N, int BLK_K, int SHAPE_K, int STAGES, class Store>
__device__ void gemm_tile_mma(ThreadGroup<32 * WARPS_M * WARPS_N> g, int m, int n, int k, int i0, int j0,
                              const complex<double>* __restrict__ A, long long lda, int opA,
                              const complex<double>* __restrict__ B, long long ldb, int opB,
                              double* s, Store store) {
  gemm_tile_mma_dispatch<WARPS_M, WARPS_N, BLK_M, BLK_N, BLK_K, SHAPE_K, STAGES, true>(
      g, m, n, k, i0, j0, reinterpret_cast<const double*>(A), 2 * lda, opA, reinterpret_cast<const double*>(B),
      2 * ldb, opB, s, store);
}

}  // namespace bdf
