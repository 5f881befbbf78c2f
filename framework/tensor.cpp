#include "framework/tensor.h"

#include <algorithm>
#include <sstream>

namespace attnlab {

std::string shape_str(const Shape& shape) {
  std::ostringstream out;
  out << '(';
  for (size_t i = 0; i < shape.size(); ++i) out << (i ? ", " : "") << shape[i];
  if (shape.size() == 1) out << ',';
  out << ')';
  return out.str();
}

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t s : shape) {
    if (s < 0) throw ShapeError("negative size in shape " + shape_str(shape));
    n *= s;
  }
  return n;
}

Tensor::Tensor(Shape shape, Real fill)
    : shape_(std::move(shape)), data_(static_cast<size_t>(shape_numel(shape_)), fill) {}

Tensor Tensor::from(Shape shape, std::vector<Real> values) {
  if (shape_numel(shape) != static_cast<int64_t>(values.size()))
    throw ShapeError("Tensor::from: shape " + attnlab::shape_str(shape) + " holds " +
                     std::to_string(shape_numel(shape)) + " values, got " + std::to_string(values.size()));
  Tensor t;
  t.shape_ = std::move(shape);
  t.data_.assign(values.begin(), values.end());
  return t;
}

Tensor Tensor::uninitialized(Shape shape) {
  Tensor t;
  t.data_.resize(static_cast<size_t>(shape_numel(shape)));  // default-initialised: no fill
  t.shape_ = std::move(shape);
  return t;
}

int64_t Tensor::size(int axis) const {
  int d = dim();
  int a = axis < 0 ? axis + d : axis;
  if (a < 0 || a >= d)
    throw ShapeError("axis " + std::to_string(axis) + " out of range for shape " + shape_str());
  return shape_[static_cast<size_t>(a)];
}

Real Tensor::item() const {
  if (numel() != 1) throw ShapeError("item() needs a one-element tensor, got shape " + shape_str());
  return data_[0];
}

void Tensor::fill_(Real value) { std::fill(data_.begin(), data_.end(), value); }

void Tensor::reshape_(Shape shape) {
  if (shape_numel(shape) != numel())
    throw ShapeError("cannot reshape " + shape_str() + " to " + attnlab::shape_str(shape));
  shape_ = std::move(shape);
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor t = *this;
  t.reshape_(std::move(shape));
  return t;
}

static int64_t last_dim(const Shape& s) { return s.empty() ? 1 : s.back(); }

MatMap Tensor::matrix() {
  int64_t cols = last_dim(shape_);
  return MatMap(data(), cols ? numel() / cols : 0, cols);
}
ConstMatMap Tensor::matrix() const {
  int64_t cols = last_dim(shape_);
  return ConstMatMap(data(), cols ? numel() / cols : 0, cols);
}
MatMap Tensor::matrix(int64_t rows, int64_t cols) {
  if (rows * cols != numel())
    throw ShapeError("cannot view " + shape_str() + " as a " + std::to_string(rows) + "x" + std::to_string(cols) + " matrix");
  return MatMap(data(), rows, cols);
}
ConstMatMap Tensor::matrix(int64_t rows, int64_t cols) const {
  if (rows * cols != numel())
    throw ShapeError("cannot view " + shape_str() + " as a " + std::to_string(rows) + "x" + std::to_string(cols) + " matrix");
  return ConstMatMap(data(), rows, cols);
}

int64_t Tensor::batch_count() const {
  if (dim() < 2) throw ShapeError("batch view needs at least 2 dims, got " + shape_str());
  int64_t n = 1;
  for (int i = 0; i + 2 < dim(); ++i) n *= shape_[static_cast<size_t>(i)];
  return n;
}
MatMap Tensor::batch(int64_t b) {
  int64_t r = size(-2), c = size(-1);
  return MatMap(data() + b * r * c, r, c);
}
ConstMatMap Tensor::batch(int64_t b) const {
  int64_t r = size(-2), c = size(-1);
  return ConstMatMap(data() + b * r * c, r, c);
}

void check_shape(const Shape& got, const Shape& expected, const std::string& what) {
  if (got != expected)
    throw ShapeError(what + ": expected shape " + shape_str(expected) + ", got " + shape_str(got));
}

}  // namespace attnlab
