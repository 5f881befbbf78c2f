#include "framework/io/test_point.h"

namespace attnlab {

namespace {

std::function<void()>& hook() {
  static std::function<void()> installed;
  return installed;
}

}  // namespace

void test_point() {
  if (hook()) hook()();
}

void set_test_point_hook(std::function<void()> hook_) { hook() = std::move(hook_); }

}  // namespace attnlab
