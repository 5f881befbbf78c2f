#pragma once
// The scalar type of the engine. Users train in float32; the test suite also
// builds the engine in float64 (ATTNLAB_DOUBLE) so gradient checks can be tight.
namespace attnlab {
#ifdef ATTNLAB_DOUBLE
using Real = double;
#else
using Real = float;
#endif
}  // namespace attnlab
