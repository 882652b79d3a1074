// gtest main for tests that run on every rank of one MPI job (tests/dist_mpi_test.sh starts
// them under mpirun): the job fails when any rank has a failure, and every rank exits with
// the same status so mpirun does not report a half-failed job as a crash.
#include <gtest/gtest.h>

#include <cstdio>

#include "dist/dist.h"
#include "sloth/sloth.h"

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  sloth::dist::init();
  int failed = RUN_ALL_TESTS();
  // Every rank learns whether any failed (an all_reduce of the failure flags).
  sloth::Tensor f = sloth::tensor(static_cast<double>(failed != 0), sloth::kInt64);
  sloth::dist::all_reduce(f, sloth::dist::ReduceOp::kMax);
  failed = f.item<int64_t>() != 0;
  if (failed && sloth::dist::rank() == 0)
    std::fprintf(stderr, "%s: a rank of %d failed\n", argv[0], sloth::dist::world_size());
  sloth::dist::finalize();
  return failed;
}
