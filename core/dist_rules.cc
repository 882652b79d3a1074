// Shape and dtype rules of the distributed collectives: all_reduce and broadcast keep the
// shape; all_gather stacks the ranks' blocks along dim 0 ([n, ...] -> [world*n, ...]; a 0-dim
// tensor gives [world]); reduce_scatter gives each rank its block of dim 0 ([world*n, ...] ->
// [n, ...]). The world size comes from CollectiveAttrs, so the rule needs no MPI.
#include "core/dist_rules.h"

#include "core/op_attrs.h"
#include "core/rule_helpers.h"

namespace sloth {

using namespace rules;  // NOLINT: the shared rule vocabulary

absl::Status rule_collective(OpId op, Metas in, Attrs& a, OutputMeta* out) {
  SLOTH_RETURN_IF_ERROR(check_arity(op, in));
  const CollectiveAttrs c = CollectiveAttrs::of(a);
  if (c.world < 1 || c.rank < 0 || c.rank >= c.world)
    return invalid("%s: rank %d of a world of %d processes is impossible; call sloth::dist::init() "
                   "and pass dist::rank() and dist::world_size()", op_name(op), c.rank, c.world);
  const bool reduces = op == OpId::kAllReduce || op == OpId::kReduceScatter;
  if (reduces) {
    if (c.reduce < CollectiveAttrs::kSum || c.reduce > CollectiveAttrs::kMin)
      return invalid("%s: unknown reduce op %d; use ReduceOp::kSum, kAvg, kMax or kMin", op_name(op),
                     c.reduce);
    if (in[0].dtype == DType::kBool)
      return invalid("%s: cannot reduce a bool tensor %s; convert it with .to(kInt64) first",
                     op_name(op), sh(in[0]));
    if (c.reduce == CollectiveAttrs::kAvg && !is_floating(in[0].dtype))
      return invalid("%s: ReduceOp::kAvg needs a floating tensor, got %s %s; use kSum and divide, "
                     "or convert with .to(kFloat64)", op_name(op), dtype_name(in[0].dtype), sh(in[0]));
  }
  if (op == OpId::kBroadcast && (c.root < 0 || c.root >= c.world))
    return invalid("%s: root rank %d is outside the world of %d processes; pick 0 <= root < %d",
                   op_name(op), c.root, c.world, c.world);
  out->dtype = in[0].dtype;
  out->shape = *in[0].shape;
  if (op == OpId::kAllGather) {
    if (out->shape.empty()) out->shape = {c.world};
    else out->shape[0] *= c.world;
  } else if (op == OpId::kReduceScatter) {
    if (out->shape.empty() || out->shape[0] % c.world != 0)
      return invalid("%s: the input's dim 0 must split into %d equal blocks (one per rank), got %s; "
                     "pad dim 0 to a multiple of %d", op_name(op), c.world, sh(in[0]), c.world);
    out->shape[0] /= c.world;
  }
  return absl::OkStatus();
}

}  // namespace sloth
