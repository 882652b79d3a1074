// Human-readable IR: text (one line per node, with root hashes) or Graphviz dot.
#pragma once

#include <string>

#include "absl/types/span.h"
#include "lazy/node.h"

namespace sloth::lazy {

std::string dump_text(absl::Span<const NodePtr> roots);
std::string dump_dot(absl::Span<const NodePtr> roots);

}  // namespace sloth::lazy
