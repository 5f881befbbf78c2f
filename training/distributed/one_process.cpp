// The one-process stand-in for callers that have no communicator of their own.
#include "training/distributed/communicator.h"

namespace attnlab {

const Communicator& single_process() {
  static const Communicator one;
  return one;
}

}  // namespace attnlab
