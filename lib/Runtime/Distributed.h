//===- Distributed.h - A model run by several processes ---------*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// What the model and the executable's main need from a launcher of several
// processes (docs/Distributed.md): the rank and the number of processes, a
// few collectives, and the agreed error path. The runtime core knows no
// MPI: lib/Runtime/MPI implements this interface and installs it before
// main runs; without it every helper below answers for one process.
// Internal to lib/Runtime.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_DISTRIBUTED_H
#define LIB_RUNTIME_DISTRIBUTED_H

#include <cstdint>
#include <string>

namespace vmoe::runtime {

/// The processes of one run of an expert parallel model.
class Distribution {
public:
  virtual ~Distribution();
  /// This process, 0 .. size() - 1.
  virtual int rank() const = 0;
  /// Number of processes.
  virtual int size() const = 0;
  /// Sums `count` values over all processes, in place on every process.
  virtual void sumAll(int64_t *values, int64_t count) = 0;
  /// Concatenates the `count` floats of every process in rank order into
  /// `all` (size() * count floats) on every process.
  virtual void gatherAll(const float *mine, int64_t count, float *all) = 0;
  /// Whether every process is `ok`: the agreed error path before the first
  /// collective of a run. Each process calls it once.
  virtual bool agree(bool ok) = 0;
  /// Ends every process after an error only this one saw (after agree()).
  [[noreturn]] virtual void abort(const std::string &message) = 0;

  /// Bytes of weights this process read: all of them, and those of expert
  /// tensors (set by Model::load, reported by the launcher).
  int64_t weightBytesRead = 0;
  int64_t expertBytesRead = 0;
};

/// The installed distribution, or null for one process.
Distribution *getDistribution();
void setDistribution(Distribution *distribution);

/// "rank R: " under a distribution, else "".
std::string rankPrefix();

/// Whether this process reads image `index` of a run in batches of `batch`
/// images: under a distribution of R processes, batch s * R + r of the
/// one-process run is rank r's (docs/Distributed.md §2).
bool ownsImage(int64_t index, int64_t batch);

/// agree(ok) under a distribution, else `ok`.
bool agreeToRun(bool ok);

/// Whether this process prints results (rank 0, or the only process).
bool isPrintingProcess();

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_DISTRIBUTED_H
