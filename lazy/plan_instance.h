// Plans for new sizes without planning again (DESIGN I6). A graph's key treats sizes as
// symbols (lazy/size_key.h), so a cached plan serves every graph of its key: instantiating
// it maps each size the key hashed as a symbol to that symbol's value in the new graph. The
// kernels, fusion decisions and liveness are reused; only the backend's compile (which
// specializes on concrete sizes) runs again, and the scheduler caches its result per sizes.
#pragma once

#include <optional>
#include <string>

#include "absl/types/span.h"
#include "lazy/graph.h"
#include "lazy/plan.h"

namespace sloth::lazy {

// When the sizes of `g` specialize those of a plan built for a graph of the same structure
// key whose size stream was `tmpl_ids` with `tmpl_symbols` symbols (sizes equal there are
// equal in g), the value in g of each of that graph's symbols; else nullopt.
std::optional<std::vector<int64_t>> specialize(absl::Span<const uint32_t> tmpl_ids,
                                               size_t tmpl_symbols, const Graph& g);

// The plan `tmpl`, built for symbol values `from`, for `g` whose values of those symbols are
// `to` (specialize): slot and instruction shapes and the size attributes (for_each_size_attr)
// map from -> to, input slots take g's input layouts. nullopt when some size of the plan is
// not one of `from` (nothing the graph hashed): the caller plans `g` afresh. Without
// `with_kernels` the result has no kernels and free_after (Backend::instantiate_reads_kernels).
std::optional<Plan> instantiate_plan(const Plan& tmpl, absl::Span<const int64_t> from,
                                     absl::Span<const int64_t> to, const Graph& g,
                                     bool with_kernels = true);

// Why `fresh` (a new plan) could not be an instance of `cached`, a plan of the same structure:
// the first size that breaks the correspondence (a size 0/1 against a larger one, two sizes
// equal in the cached plan and different here, a contiguity change, an attribute that holds a
// size but is hashed literally). Empty when none is found.
std::string size_mismatch_reason(const Plan& fresh, const Plan& cached);

}  // namespace sloth::lazy
