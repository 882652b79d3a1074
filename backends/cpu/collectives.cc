// The distributed collectives (core/ops.def, `---- distributed ----`) on the CPU: each kernel
// makes a fresh contiguous result and hands the buffers to MPI (MPI_COMM_WORLD). The ranks
// run the same program, so they reach the same collectives in the same order (the backend
// runs a plan's steps one after another, on the thread that called the sync).
//
// A 1-process world (CollectiveAttrs::world == 1) computes without MPI, so the op-table
// tests and programs started without mpirun need no MPI at all. ReduceOp::kAvg sums and
// divides by the world size (MPI has no average).
//
// SLOTH_DIST_CHECK=1 turns on a pre-exchange before each collective: every rank sends a small
// fixed record (sequence number, op, reduce op, root, dtype, shape) with MPI_Allgather, and
// every rank compares all of them, so mismatched collectives (different order, shapes or
// dtypes on different ranks) fail on every rank with an error naming the ranks, instead of
// hanging or reducing garbage. The tests turn it on.
#include <mpi.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "backends/cpu/kernels.h"
#include "backends/cpu/op_kernels.h"
#include "core/error.h"
#include "core/op_attrs.h"

namespace sloth::cpu {
namespace {

absl::Status mpi_error(const Instr& in, const char* call, int code) {
  char msg[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(code, msg, &len);
  return absl::InternalError(absl::StrFormat("%s: %s failed: %s", op_name(in.op), call,
                                             std::string(msg, len)));
}
#define SLOTH_MPI(in, call)                                         \
  do {                                                              \
    if (int rc_ = (call); rc_ != MPI_SUCCESS) return mpi_error(in, #call, rc_); \
  } while (0)

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::kBool: return MPI_C_BOOL;
    case DType::kInt32: return MPI_INT32_T;
    case DType::kInt64: return MPI_INT64_T;
    case DType::kFloat32: return MPI_FLOAT;
    case DType::kFloat64: return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

MPI_Op mpi_op(int64_t reduce) {
  switch (reduce) {
    case CollectiveAttrs::kMax: return MPI_MAX;
    case CollectiveAttrs::kMin: return MPI_MIN;
    default: return MPI_SUM;  // kSum, and kAvg before its division
  }
}

// MPI counts are ints; bigger tensors would need chunking (not written yet).
absl::Status check_ready(const Instr& in, int64_t count) {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return absl::FailedPreconditionError(absl::StrFormat(
        "%s: MPI is %s; call sloth::dist::init() before the first collective and "
        "sloth::dist::finalize() after the last", op_name(in.op),
        finalized ? "already finalized" : "not initialized"));
  if (count > INT_MAX)
    return absl::UnimplementedError(absl::StrFormat(
        "%s: %d elements exceed MPI's int count; split the tensor into chunks of at most %d",
        op_name(in.op), count, INT_MAX));
  return absl::OkStatus();
}

// ---- the debug pre-exchange ----
constexpr int kMaxDims = 8;
struct Record {
  int64_t seq, op, reduce, root, dtype, ndim, dims[kMaxDims];
};
int64_t& sequence() {
  static int64_t seq = 0;  // collectives issued by this process through MPI
  return seq;
}
bool check_enabled() {
  const char* v = std::getenv("SLOTH_DIST_CHECK");
  return v != nullptr && v[0] == '1';
}
std::string describe(const Record& r) {
  std::string shape = "[";
  for (int64_t d = 0; d < r.ndim && d < kMaxDims; ++d) shape += (d ? ", " : "") + std::to_string(r.dims[d]);
  shape += r.ndim > kMaxDims ? ", ...]" : "]";
  return absl::StrFormat("collective #%d %s(%s %s, reduce %d, root %d)", r.seq,
                         op_name(static_cast<OpId>(r.op)),
                         dtype_name(static_cast<DType>(r.dtype)), shape, r.reduce, r.root);
}
absl::Status check_matching(const Instr& in, const DeviceData& x, const CollectiveAttrs& c) {
  const int64_t seq = sequence()++;
  if (!check_enabled()) return absl::OkStatus();
  Record mine{seq, static_cast<int64_t>(in.op), c.reduce, c.root,
              static_cast<int64_t>(x.dtype), static_cast<int64_t>(x.layout.shape.size()), {}};
  if (in.op != OpId::kAllReduce && in.op != OpId::kReduceScatter) mine.reduce = 0;
  if (in.op != OpId::kBroadcast) mine.root = 0;
  for (int64_t d = 0; d < mine.ndim && d < kMaxDims; ++d) mine.dims[d] = x.layout.shape[d];
  std::vector<Record> all(static_cast<size_t>(c.world));
  SLOTH_MPI(in, MPI_Allgather(&mine, sizeof(Record), MPI_BYTE, all.data(), sizeof(Record),
                              MPI_BYTE, MPI_COMM_WORLD));
  for (int64_t r = 1; r < c.world; ++r)
    if (std::memcmp(&all[r], &all[0], sizeof(Record)) != 0)
      return absl::FailedPreconditionError(absl::StrFormat(
          "%s: mismatched collectives: rank 0 issued %s but rank %d issued %s; every rank must "
          "issue the same collectives in the same order with the same shapes and dtypes",
          op_name(in.op), describe(all[0]), r, describe(all[r])));
  return absl::OkStatus();
}

DeviceData contiguous(Env& env, const Instr& in, int i) {
  const DeviceData& x = env.get(in.in[i]);
  return x.is_contiguous() ? x : make_contiguous(env, x, x.dtype);
}

void divide(DeviceData& out, int64_t world) {
  if (out.dtype == DType::kFloat32) {
    float* p = out.data<float>();
    const float w = static_cast<float>(world);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] /= w;
  } else if (out.dtype == DType::kFloat64) {
    double* p = out.data<double>();
    const double w = static_cast<double>(world);
    for (int64_t i = 0, n = out.numel(); i < n; ++i) p[i] /= w;
  }
}

// all_reduce and broadcast: the result starts as a copy of the input and is reduced or
// overwritten in place (MPI_IN_PLACE), so no second buffer is needed.
absl::Status run_in_place(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = out.numel();
  if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
  if (c.world == 1) return absl::OkStatus();
  SLOTH_RETURN_IF_ERROR(check_ready(in, n));
  SLOTH_RETURN_IF_ERROR(check_matching(in, x, c));
  if (n == 0) return absl::OkStatus();
  if (in.op == OpId::kBroadcast) {
    SLOTH_MPI(in, MPI_Bcast(out.raw(), static_cast<int>(n), mpi_type(in.dtype),
                            static_cast<int>(c.root), MPI_COMM_WORLD));
    return absl::OkStatus();
  }
  SLOTH_MPI(in, MPI_Allreduce(MPI_IN_PLACE, out.raw(), static_cast<int>(n), mpi_type(in.dtype),
                              mpi_op(c.reduce), MPI_COMM_WORLD));
  if (c.reduce == CollectiveAttrs::kAvg) divide(out, c.world);
  return absl::OkStatus();
}

absl::Status run_all_gather(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = x.numel();
  if (c.world == 1) {
    if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
    return absl::OkStatus();
  }
  SLOTH_RETURN_IF_ERROR(check_ready(in, out.numel()));
  SLOTH_RETURN_IF_ERROR(check_matching(in, x, c));
  if (n == 0) return absl::OkStatus();
  SLOTH_MPI(in, MPI_Allgather(x.raw(), static_cast<int>(n), mpi_type(in.dtype), out.raw(),
                              static_cast<int>(n), mpi_type(in.dtype), MPI_COMM_WORLD));
  return absl::OkStatus();
}

absl::Status run_reduce_scatter(Env& env, const Instr& in) {
  const CollectiveAttrs c = CollectiveAttrs::of(in.attrs);
  const DeviceData x = contiguous(env, in, 0);
  DeviceData& out = env.alloc_to(in.out, in.shape, in.dtype);
  const int64_t n = out.numel();
  if (c.world == 1) {
    if (n > 0) std::memcpy(out.raw(), x.raw(), n * dtype_size(in.dtype));
    return absl::OkStatus();
  }
  SLOTH_RETURN_IF_ERROR(check_ready(in, x.numel()));
  SLOTH_RETURN_IF_ERROR(check_matching(in, x, c));
  if (n == 0) return absl::OkStatus();
  SLOTH_MPI(in, MPI_Reduce_scatter_block(x.raw(), out.raw(), static_cast<int>(n),
                                         mpi_type(in.dtype), mpi_op(c.reduce), MPI_COMM_WORLD));
  if (c.reduce == CollectiveAttrs::kAvg) divide(out, c.world);
  return absl::OkStatus();
}

}  // namespace

SLOTH_CPU_OP_KERNEL(kAllReduce, run_in_place);
SLOTH_CPU_OP_KERNEL(kBroadcast, run_in_place);
SLOTH_CPU_OP_KERNEL(kAllGather, run_all_gather);
SLOTH_CPU_OP_KERNEL(kReduceScatter, run_reduce_scatter);

}  // namespace sloth::cpu
