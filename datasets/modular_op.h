#pragma once
// The operations of the `modular` task (datasets/modular.cpp; docs/data.md):
// c = a ∘ b mod p for residues a, b in [0, p) (Power et al. 2022, Nanda et al. 2023).
//   add  a + b          sub  a - b (in [0, p))      mul  a × b
//   div  a × b⁻¹, b ≠ 0, p prime (b⁻¹ the inverse of b mod p)
//   sq   a² + b²
#include <cstdint>

#include "framework/choices.h"

namespace attnlab {

enum class ModularOp { add, sub, mul, div, sq };
const ChoiceNames<ModularOp>& choice_names(ModularOp);

// The operator's token in the task's inputs: "+", "-", "*", "/", "sq".
const char* operator_token(ModularOp op);

// Whether n is prime (trial division; the task's moduli are small).
bool is_prime(int64_t n);

// a ∘ b mod p for a, b in [0, p), 2 <= p <= 3037000499 (so a × b fits);
// div needs a prime p and b != 0 (ValueError otherwise).
int64_t modular_result(ModularOp op, int64_t a, int64_t b, int64_t p);

}  // namespace attnlab
