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

#include "llvm/ADT/ArrayRef.h"

#include <cstdint>
#include <string>

namespace vmoe::runtime {

/// A setting every process of a run must share (docs/Distributed.md §1):
/// the processes compute one run together and rank 0 prints it, so a
/// process given another image count, capacity ratio or printing option
/// would hang the exchanges or print what another process asked for.
struct RunSetting {
  /// What the setting is, as messages name it ("--capacity-ratio").
  const char *name;
  double value;
  /// Names of the values 0, 1, ... of an enumerated setting (else the
  /// value is printed as a number).
  llvm::ArrayRef<const char *> valueNames = {};
};

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
  /// Whether every process is `ok` and then has the same `settings` (in
  /// the same order): the agreed error path before the first collective of
  /// a run. A process that is not ok said why; on different settings every
  /// process prints one line naming the first that differs. Each process
  /// calls it once.
  virtual bool agree(bool ok, llvm::ArrayRef<RunSetting> settings) = 0;
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

/// agree(ok, settings) under a distribution, else `ok`.
bool agreeToRun(bool ok, llvm::ArrayRef<RunSetting> settings);

/// "error: <rankPrefix()><message>" and a newline on stderr in one write,
/// so that the lines of processes failing at once do not interleave.
void printErrorLine(const std::string &message);

/// `setting`'s value for messages: its value name, else the shortest
/// decimal that reads back as the value.
std::string formatSetting(const RunSetting &setting, double value);

/// Whether this process prints results (rank 0, or the only process).
bool isPrintingProcess();

} // namespace vmoe::runtime

#endif // LIB_RUNTIME_DISTRIBUTED_H
