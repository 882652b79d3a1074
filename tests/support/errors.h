// Test helpers for errors: the message a statement throws, and an expectation on it.
#pragma once

#include <functional>
#include <string>

#include "gtest/gtest.h"
#include "sloth/sloth.h"

namespace sloth::testing {

// The sloth::Error message `f` throws, or "" when it throws nothing.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace sloth::testing

// Expects `stmt` to throw a sloth::Error whose message contains `text`.
#define EXPECT_ERROR_HAS(stmt, text)                                                      \
  do {                                                                                    \
    std::string _e = ::sloth::testing::error_of([&] { stmt; });                           \
    EXPECT_NE(_e.find(text), std::string::npos) << "message: " << (_e.empty() ? "<no error>" : _e); \
  } while (0)
