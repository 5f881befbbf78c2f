#include "framework/probe/fourier.h"

#include <cmath>

#include "framework/error.h"

namespace attnlab {

std::vector<double> fourier_norms(const Tensor& rows) {
  if (rows.dim() != 2 || rows.size(0) < 1)
    throw ShapeError("fourier_norms: expected rows (p, d) with p >= 1, got " + shape_str(rows.shape()));
  const int64_t p = rows.size(0), d = rows.size(1);
  const double two_pi = 2 * std::acos(-1.0);
  std::vector<double> out;
  std::vector<double> c(static_cast<size_t>(d)), s(static_cast<size_t>(d));
  for (int64_t k = 0; k <= p / 2; ++k) {
    std::fill(c.begin(), c.end(), 0.0);
    std::fill(s.begin(), s.end(), 0.0);
    for (int64_t a = 0; a < p; ++a) {
      const double angle = two_pi * static_cast<double>((k * a) % p) / static_cast<double>(p);  // exact phase
      const double ca = std::cos(angle), sa = std::sin(angle);
      const Real* row = rows.data() + a * d;
      for (int64_t j = 0; j < d; ++j) {
        c[static_cast<size_t>(j)] += ca * row[j];
        s[static_cast<size_t>(j)] += sa * row[j];
      }
    }
    double sq = 0;
    for (size_t j = 0; j < c.size(); ++j) sq += c[j] * c[j] + s[j] * s[j];
    out.push_back(std::sqrt(sq));
  }
  return out;
}

}  // namespace attnlab
