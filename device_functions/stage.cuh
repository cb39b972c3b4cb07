// stage.cuh: asynchronous copies of small operands from global into shared memory.
//
// Why: a thread group that multiplies a small matrix straight from global
// memory has only its few unrolled loads in flight, and each load is one
// element of a short, often strided, column.  Staging the whole matrix with
// cp.async (sm_80+) puts every element of it in flight at once without
// holding registers, and reads a packed matrix as one contiguous run, so the
// warp's accesses coalesce whatever the matrix's orientation.  The product
// then runs on shared memory, where gemv_n / gemv_t accept their operands.
//
// Threads:  a ThreadGroup<G>; every thread of the group calls each function.
// Shared:   the caller owns the destination (m * n elements, packed with
//           leading dimension m; element size 4, 8 or 16 bytes).
// Sync:     stage_* only issue copies; the caller commits them
//           (stage_commit), waits for its own (stage_wait<N>) and then
//           synchronizes the group before anyone reads the destination.
// Memory:   sources are read once; nothing is read when m or n is 0.
// Failure:  none.
#pragma once
#include "common.cuh"

namespace bdf {

template <typename T> __device__ __forceinline__ void copy_async(T* shared_dst, const T* global_src) {
  static_assert(sizeof(T) == 4 || sizeof(T) == 8 || sizeof(T) == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" ::"r"(dst), "l"(global_src),
               "n"(int(sizeof(T))) : "memory");
}

// BYTES (4, 8 or 16) bytes from global to shared memory, of which only the
// first src_bytes (0 .. BYTES) are read and the rest are zero-filled: the
// copy of a tile element that is partly or wholly outside its matrix (with
// src_bytes = 0 nothing is read).  16-byte copies bypass L1 (.cg).
template <int BYTES>
__device__ __forceinline__ void copy_async_zfill(void* shared_dst, const void* global_src, int src_bytes) {
  static_assert(BYTES == 4 || BYTES == 8 || BYTES == 16, "cp.async copies 4, 8 or 16 bytes");
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(shared_dst));
  if constexpr (BYTES == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(global_src), "r"(src_bytes)
                 : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(dst), "l"(global_src), "n"(BYTES),
                 "r"(src_bytes) : "memory");
}

// Closes the batch of copies this thread issued since the last commit.
__device__ __forceinline__ void stage_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

// Waits until at most PENDING of this thread's committed batches are still in flight.
template <int PENDING> __device__ __forceinline__ void stage_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(PENDING) : "memory");
}

// s[i + j * m] = A[i + j * lda] for i < m, j < n.
template <typename T, int G>
__device__ void stage_matrix(ThreadGroup<G> g, int m, int n, const T* A, long long lda, T* s) {
  const int total = m * n;
  if (total == 0) return;
  if (lda == m) {  // packed columns: one contiguous run
    for (int e = g.rank; e < total; e += G) copy_async(s + e, A + e);
    return;
  }
  // Column by column: each thread steps its (i, j) by G elements without dividing per element.
  const int dj = G / m, di = G - dj * m;
  int j = g.rank / m, i = g.rank - j * m;
  for (int e = g.rank; e < total; e += G) {
    copy_async(s + e, A + i + j * lda);
    i += di;
    j += dj;
    if (i >= m) {
      i -= m;
      ++j;
    }
  }
}

// s[i] = x[i * incx] for i < len.
template <typename T, int G>
__device__ void stage_vector(ThreadGroup<G> g, int len, const T* x, long long incx, T* s) {
  for (int i = g.rank; i < len; i += G) copy_async(s + i, x + i * incx);
}

}  // namespace bdf
