// layouts.cuh: how a kernel finds matrix b and vector b of a batch.
//
// The three batch layouts differ only here; every batched kernel is one body
// templated on these accessors.  All fields are 8 bytes wide so that the host
// passes each accessor as one NumPy structured scalar of the same layout
// (batched/_launch.py builds them).  Element (i, j) of a matrix is at
// matrix(b)[i + j * ld(b)] (column-major; launchers present row-major data as
// the transpose).  Offsets are 64-bit: a batch may span more than 2^31 elements.
#pragma once

namespace bdf {

// Stacked matrices: base + b * stride, one shape and leading dimension.
template <typename T> struct UniformMatrix {
  using value_type = T;
  T* base;
  long long stride, ld, m, n;
  __device__ T* matrix(long long b) const { return base + b * stride; }
  __device__ int rows(long long) const { return int(m); }
  __device__ int cols(long long) const { return int(n); }
  __device__ long long ldim(long long) const { return ld; }
};

// Is M the uniform accessor (kernels that stream packed batches check its fields)?
template <class M> struct is_uniform_matrix { static constexpr bool value = false; };
template <typename T> struct is_uniform_matrix<UniformMatrix<T>> { static constexpr bool value = true; };
// Is M the variable-size accessor (launch shapes that depend on how unevenly members finish)?
template <class M> struct is_variable_matrix { static constexpr bool value = false; };

// A device array of pointers to same-shape matrices with one leading dimension.
// `offset` shifts every pointer (submatrices of every member, for recursive drivers).
template <typename T> struct PointerMatrix {
  using value_type = T;
  T* const* ptrs;
  long long offset, ld, m, n;
  __device__ T* matrix(long long b) const { return ptrs[b] + offset; }
  __device__ int rows(long long) const { return int(m); }
  __device__ int cols(long long) const { return int(n); }
  __device__ long long ldim(long long) const { return ld; }
};

// Each matrix its own shape and leading dimension (device arrays of length batch).
template <typename T> struct VariableMatrix {
  using value_type = T;
  T* const* ptrs;
  const long long* m_;
  const long long* n_;
  const long long* ld_;
  __device__ T* matrix(long long b) const { return ptrs[b]; }
  __device__ int rows(long long b) const { return int(m_[b]); }
  __device__ int cols(long long b) const { return int(n_[b]); }
  __device__ long long ldim(long long b) const { return ld_[b]; }
};
template <typename T> struct is_variable_matrix<VariableMatrix<T>> { static constexpr bool value = true; };

// Vectors: element i of vector b is at vector(b)[i * inc] (inc may be negative
// only through the base pointer the host computes; stride 0 broadcasts).
template <typename T> struct UniformVector {
  T* base;
  long long stride, inc;
  __device__ T* vector(long long b) const { return base + b * stride; }
};

// With a null `ptrs`, vector b is base + b * stride: the rows of one array,
// without a pointer array built (and read) for every call.
template <typename T> struct PointerVector {
  T* const* ptrs;
  long long offset, inc;
  T* base;
  long long stride;
  __device__ T* vector(long long b) const { return ptrs ? ptrs[b] + offset : base + b * stride; }
};

}  // namespace bdf
