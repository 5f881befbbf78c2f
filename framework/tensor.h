#pragma once
// Tensor: a shape and contiguous row-major storage of Real, with Eigen views.
// Every file gets Eigen from here. GCC 12's AVX-512 intrinsics start some
// results from `__m512 __Y = __Y;` (_mm512_undefined_ps), which it reports as
// used uninitialized wherever Eigen's packets inline them: silenced for
// Eigen's code only, so that attnlab's own code keeps the warning. (GCC 12
// drops this pragma from a precompiled header: CMakeLists.txt leaves Eigen
// out of it there.)
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <Eigen/Core>
#pragma GCC diagnostic pop
#else
#include <Eigen/Core>
#endif
#include <cstdint>
#include <cstddef>
#include <initializer_list>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "framework/error.h"
#include "framework/memory_pool.h"
#include "framework/real.h"

namespace attnlab {

using Shape = std::vector<int64_t>;

// Tensor storage: 64-byte aligned blocks from the buffer cache
// (memory_pool.h). Aligning every buffer the same way also makes results
// bitwise reproducible: Eigen's vectorised loops peel to an aligned address,
// so the order of a reduction depends on where a buffer starts. Elements are
// default-initialised (not zeroed) unless a value is given, so an op that
// writes every element of its output pays for no memset.
template <class T>
struct TensorAllocator {
  using value_type = T;
  TensorAllocator() = default;
  template <class U>
  TensorAllocator(const TensorAllocator<U>&) {}
  T* allocate(std::size_t n) { return static_cast<T*>(memory::allocate(n * sizeof(T))); }
  void deallocate(T* p, std::size_t n) noexcept { memory::release(p, n * sizeof(T)); }
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
  template <class U>
  bool operator==(const TensorAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const TensorAllocator<U>&) const { return false; }
};

using RowMatrix = Eigen::Matrix<Real, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MatMap = Eigen::Map<RowMatrix>;
using ConstMatMap = Eigen::Map<const RowMatrix>;
using VecMap = Eigen::Map<Eigen::Matrix<Real, Eigen::Dynamic, 1>>;
using ConstVecMap = Eigen::Map<const Eigen::Matrix<Real, Eigen::Dynamic, 1>>;

std::string shape_str(const Shape& shape);  // "(2, 3, 4)"
int64_t shape_numel(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(Shape shape, Real fill = 0);  // throws ShapeError on a negative size
  static Tensor from(Shape shape, std::vector<Real> values);  // values.size() must match
  // Storage with unspecified values, for outputs that are written in full.
  static Tensor uninitialized(Shape shape);

  const Shape& shape() const { return shape_; }
  int dim() const { return static_cast<int>(shape_.size()); }
  int64_t size(int axis) const;  // negative axes count from the end
  int64_t numel() const { return static_cast<int64_t>(data_.size()); }
  bool empty() const { return data_.empty() && shape_.empty(); }
  std::string shape_str() const { return attnlab::shape_str(shape_); }

  Real* data() { return data_.data(); }
  const Real* data() const { return data_.data(); }
  Real& operator[](int64_t i) { return data_[static_cast<size_t>(i)]; }
  Real operator[](int64_t i) const { return data_[static_cast<size_t>(i)]; }
  Real item() const;  // the value of a one-element tensor

  void fill_(Real value);
  void zero_() { fill_(0); }
  void reshape_(Shape shape);        // same numel, no copy
  // Free the storage and keep the shape (a graph node whose value nothing reads
  // again); data() is then null and numel() 0.
  void release_storage() noexcept { decltype(data_)().swap(data_); }
  Tensor reshaped(Shape shape) const;  // a copy with a new shape

  // Eigen views without copies. matrix() is (numel / last, last); a 0-d or
  // 1-d tensor is one row. batch(b) is matrix b of a (..., rows, cols) tensor.
  MatMap matrix();
  ConstMatMap matrix() const;
  MatMap matrix(int64_t rows, int64_t cols);
  ConstMatMap matrix(int64_t rows, int64_t cols) const;
  MatMap batch(int64_t b);
  ConstMatMap batch(int64_t b) const;
  int64_t batch_count() const;  // product of all but the last two dims
  VecMap flat() { return VecMap(data(), numel()); }
  ConstVecMap flat() const { return ConstVecMap(data(), numel()); }

 private:
  Shape shape_;
  std::vector<Real, TensorAllocator<Real>> data_;
};

// Integer tensors: token ids, targets. Same layout rules as Tensor.
struct IntTensor {
  Shape shape;
  std::vector<int32_t> data;
  IntTensor() = default;
  explicit IntTensor(Shape s, int32_t fill = 0) : shape(std::move(s)), data(shape_numel(shape), fill) {}
  int64_t numel() const { return static_cast<int64_t>(data.size()); }
};

// Throws ShapeError "what: expected E, got G" unless the shapes are equal.
void check_shape(const Shape& got, const Shape& expected, const std::string& what);

}  // namespace attnlab
