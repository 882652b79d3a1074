// sloth::Error: what every public entry point throws. Messages name the op, the shapes or
// values involved and the fix.
#pragma once

#include <stdexcept>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace sloth {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
[[noreturn]] void fail(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  throw Error(absl::StrFormat(fmt, args...));
}

// Inside the runtime errors travel as absl::Status; the public face converts them here.
inline void throw_if_error(const absl::Status& s) {
  if (!s.ok()) throw Error(std::string(s.message()));
}

template <typename... Args>
absl::Status invalid(const absl::FormatSpec<Args...>& fmt, const Args&... args) {
  return absl::InvalidArgumentError(absl::StrFormat(fmt, args...));
}

#define SLOTH_RETURN_IF_ERROR(expr)              \
  do {                                           \
    ::absl::Status _st = (expr);                 \
    if (!_st.ok()) return _st;                   \
  } while (0)

#define SLOTH_CHECK(cond, ...)                   \
  do {                                           \
    if (!(cond)) ::sloth::fail(__VA_ARGS__);     \
  } while (0)

}  // namespace sloth
