#pragma once
// The sharpness of a loss: the largest eigenvalue of its Hessian H with
// respect to the parameters (all of them, as one flat vector in the
// parameters' order), or of the preconditioned P⁻¹H for a diagonal P
// (Adam's: P = diag(√v̂ + ε), Cohen et al. 2022). P⁻¹H is not symmetric, but
// D H D with D = P^{-1/2} is, and has the same eigenvalues (D H D = D⁻¹ (P⁻¹H) D);
// its eigenvector w gives P⁻¹H's as D w. Each Lanczos iteration is one
// Hessian-vector product (framework/hessian.h: about two backward passes).
//
//   HessianVectorProduct hvp(loss, params);
//   TopEigen h = largest_curvature(hvp, {}, random_start, options);        // λ_max(H)
//   TopEigen p = largest_curvature(hvp, inv_sqrt_p, h.vector, options);     // λ_max(P⁻¹H)
#include <vector>

#include "framework/hessian.h"
#include "framework/top_eigenvalue.h"

namespace attnlab {

// `scale`: D, one tensor per parameter (its shape), or empty for H itself.
// `start`: n = the parameters' total size; the previous call's vector warm-starts the next.
// ShapeError when scale or start do not fit the parameters.
TopEigen largest_curvature(HessianVectorProduct& hvp, const std::vector<Tensor>& scale, std::vector<double> start,
                           const TopEigenOptions& options);

// The tensors' values one after another, and back into tensors of the given shapes.
std::vector<double> flatten(const std::vector<Tensor>& tensors);
std::vector<Tensor> unflatten(const std::vector<double>& flat, const std::vector<Var>& like);

}  // namespace attnlab
