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
// Then the ranks compare the settings of the run (image count, capacity
// ratio, printing options): on a difference every rank prints the same
// line and exits with status 1. Errors after that (inside an exchange)
// use MPI_Abort. Every error line is one write(2), so that lines of ranks
// failing together do not interleave.
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
#include <cstring>
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

  bool agree(bool ok, llvm::ArrayRef<RunSetting> settings) override {
    agreed = true;
    runStart = std::chrono::steady_clock::now();
    // The minimum over the ranks of: ok, the number of settings and its
    // negation (a rank of another executable may have other settings).
    auto count = static_cast<int>(settings.size());
    int mine[3] = {ok ? 1 : 0, count, -count}, all[3];
    MPI_Allreduce(mine, all, 3, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (all[0] != 1)
      return false;
    if (all[1] != -all[2]) {
      printErrorLine("the ranks run different executables (" +
                     std::to_string(all[1]) + " to " +
                     std::to_string(-all[2]) + " run settings)");
      return false;
    }
    std::string mismatch = firstMismatch(settings);
    if (mismatch.empty())
      return true;
    printErrorLine(mismatch);
    return false;
  }

  [[noreturn]] void abort(const std::string &message) override {
    printErrorLine(message);
    MPI_Abort(MPI_COMM_WORLD, 1);
    std::abort();
  }

  /// Whether agree() ran (a rank that failed before it still must vote).
  bool agreed = false;
  std::chrono::steady_clock::time_point runStart;

private:
  /// Gathers every rank's `settings` and names the first that differs from
  /// rank 0's (the same text on every rank), or returns "".
  std::string firstMismatch(llvm::ArrayRef<RunSetting> settings) {
    size_t count = settings.size();
    std::vector<double> mine(count), all(count * worldSize);
    for (size_t i = 0; i < count; ++i)
      mine[i] = settings[i].value;
    MPI_Allgather(mine.data(), static_cast<int>(count), MPI_DOUBLE,
                  all.data(), static_cast<int>(count), MPI_DOUBLE,
                  MPI_COMM_WORLD);
    for (size_t i = 0; i < count; ++i)
      for (int rank = 1; rank < worldSize; ++rank) {
        double first = all[i], other = all[rank * count + i];
        // Bit for bit: a ratio must be the same number, NaN never is.
        if (std::memcmp(&first, &other, sizeof(double)) == 0)
          continue;
        return std::string(settings[i].name) + " differs between the ranks (" +
               formatSetting(settings[i], first) + " on rank 0, " +
               formatSetting(settings[i], other) + " on rank " +
               std::to_string(rank) +
               "): every rank must be given the same images and options";
      }
    return "";
  }

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
    world.agree(false, {});
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
