//===- MPIMain.cpp - main() of expert parallel model executables ----------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// main() of executables from `vmoe-compile --expert-parallel R`: MPI_Init,
// the MPI Distribution (Distributed.h), the usual command line (runMain),
// the per-rank report, MPI_Finalize. Errors before the first exchange go
// through one agreed MPI_Allreduce: a rank that fails (weights, images,
// options) prints "error: rank R: ..." and votes no, the others stop
// quietly, and every rank exits with status 1 (no hang, no MPI_Abort).
// Errors after it (inside an exchange) use MPI_Abort.
//
//===----------------------------------------------------------------------===//

#include "Exchange.h"

#include "../Distributed.h"
#include "../Main/Main.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

using namespace vmoe::runtime;

namespace {

/// MPI_COMM_WORLD as the runtime's Distribution.
class MPIDistribution final : public Distribution {
public:
  MPIDistribution() {
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    MPI_Comm_size(MPI_COMM_WORLD, &worldSize);
  }
  int rank() const override { return worldRank; }
  int size() const override { return worldSize; }

  void sumAll(int64_t *values, int64_t count) override {
    MPI_Allreduce(MPI_IN_PLACE, values, static_cast<int>(count), MPI_INT64_T,
                  MPI_SUM, MPI_COMM_WORLD);
  }

  void gatherAll(const float *mine, int64_t count, float *all) override {
    MPI_Allgather(mine, static_cast<int>(count), MPI_FLOAT, all,
                  static_cast<int>(count), MPI_FLOAT, MPI_COMM_WORLD);
  }

  bool agree(bool ok) override {
    agreed = true;
    int mine = ok ? 1 : 0, all = 0;
    MPI_Allreduce(&mine, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    runStart = std::chrono::steady_clock::now();
    return all == 1;
  }

  [[noreturn]] void abort(const std::string &message) override {
    std::fprintf(stderr, "error: rank %d: %s\n", worldRank, message.c_str());
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }

  /// Whether agree() ran (a rank that failed before it still must vote).
  bool agreed = false;
  std::chrono::steady_clock::time_point runStart;

private:
  int worldRank = 0;
  int worldSize = 1;
};

} // namespace

/// Peak resident memory of this process in bytes (VmHWM), or -1.
static long long peakResidentBytes() {
  std::FILE *status = std::fopen("/proc/self/status", "r");
  if (!status)
    return -1;
  char line[256];
  long long kib = -1;
  while (std::fgets(line, sizeof(line), status))
    if (std::sscanf(line, "VmHWM: %lld kB", &kib) == 1)
      break;
  std::fclose(status);
  return kib < 0 ? -1 : kib * 1024;
}

/// This rank's report lines.
static std::string reportOf(const MPIDistribution &world, double seconds) {
  std::string text;
  llvm::raw_string_ostream os(text);
  double mpiSeconds = 0, copySeconds = 0;
  for (const mpi::LayerTraffic &layer : mpi::traffic()) {
    mpiSeconds += layer.mpiSeconds;
    copySeconds += layer.copySeconds;
  }
  os << "mpi: rank " << world.rank() << ": weights read "
     << world.weightBytesRead << " B, of which expert weights "
     << world.expertBytesRead << " B; run "
     << llvm::format("%.3f", seconds * 1e3) << " ms, in MPI "
     << llvm::format("%.3f", mpiSeconds * 1e3) << " ms ("
     << llvm::format("%.1f", seconds > 0 ? 100 * mpiSeconds / seconds : 0.0)
     << "%), packing rows " << llvm::format("%.3f", copySeconds * 1e3)
     << " ms; peak resident " << peakResidentBytes() << " B\n";
  for (const auto &[index, layer] : llvm::enumerate(mpi::traffic()))
    os << "mpi: rank " << world.rank() << ": MoE layer " << index << ": sent "
       << layer.bytesSent << " B, received " << layer.bytesReceived << " B in "
       << layer.exchanges << " exchanges, MPI "
       << llvm::format("%.3f", layer.mpiSeconds * 1e3) << " ms\n";
  return text;
}

/// Prints the report of every rank on rank 0, in rank order.
static void printReports(const MPIDistribution &world, double seconds) {
  std::string mine = reportOf(world, seconds);
  int length = static_cast<int>(mine.size());
  std::vector<int> lengths(world.size()), offsets(world.size());
  MPI_Gather(&length, 1, MPI_INT, lengths.data(), 1, MPI_INT, 0,
             MPI_COMM_WORLD);
  int total = 0;
  for (int r = 0; r < world.size(); ++r) {
    offsets[r] = total;
    total += lengths[r];
  }
  std::string all(world.rank() == 0 ? total : 0, '\0');
  MPI_Gatherv(mine.data(), length, MPI_CHAR, all.data(), lengths.data(),
              offsets.data(), MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world.rank() != 0)
    return;
  llvm::outs() << "mpi: " << world.size()
               << " ranks, experts split evenly over them\n"
               << all;
  llvm::outs().flush();
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  static MPIDistribution world;
  mpi::setWorld(world.rank(), world.size());
  setDistribution(&world);
  int status = runMain(argc, argv);
  llvm::outs().flush();
  if (!world.agreed) {
    // Failed before the agreement (or --help): tell the others.
    world.agree(false);
    status = status ? status : 1;
  } else if (status == 0) {
    double seconds = std::chrono::duration<double>(
                         std::chrono::steady_clock::now() - world.runStart)
                         .count();
    printReports(world, seconds);
  }
  setDistribution(nullptr);
  MPI_Finalize();
  return status;
}
