#include "training/communicator.h"

namespace attnlab {

const Communicator& single_process() {
  static const Communicator one;
  return one;
}

}  // namespace attnlab
