//===- Distributed.cpp - A model run by several processes -----------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The one-process answers of Distributed.h and the installed distribution.
//
//===----------------------------------------------------------------------===//

#include "Distributed.h"

#include "vmoe/Dialect/VMoE/IR/Capacity.h"

#include <cerrno>

#include <unistd.h>

using namespace vmoe::runtime;

static Distribution *installed = nullptr;

Distribution::~Distribution() = default;

Distribution *vmoe::runtime::getDistribution() { return installed; }

void vmoe::runtime::setDistribution(Distribution *distribution) {
  installed = distribution;
}

std::string vmoe::runtime::rankPrefix() {
  if (!installed)
    return "";
  return "rank " + std::to_string(installed->rank()) + ": ";
}

bool vmoe::runtime::ownsImage(int64_t index, int64_t batch) {
  if (!installed || batch < 1)
    return true;
  return (index / batch) % installed->size() == installed->rank();
}

bool vmoe::runtime::agreeToRun(bool ok,
                               llvm::ArrayRef<RunSetting> settings) {
  return installed ? installed->agree(ok, settings) : ok;
}

void vmoe::runtime::printErrorLine(const std::string &message) {
  std::string line = "error: " + rankPrefix() + message + "\n";
  // One write(2): a pipe (mpirun's) takes up to PIPE_BUF bytes atomically.
  for (size_t done = 0; done < line.size();) {
    ssize_t n = ::write(STDERR_FILENO, line.data() + done, line.size() - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return;
    done += static_cast<size_t>(n);
  }
}

std::string vmoe::runtime::formatSetting(const RunSetting &setting,
                                         double value) {
  auto index = static_cast<size_t>(value);
  if (!setting.valueNames.empty() && value >= 0 &&
      index < setting.valueNames.size() && static_cast<double>(index) == value)
    return setting.valueNames[index];
  return vmoe::formatShortest(value);
}

bool vmoe::runtime::isPrintingProcess() {
  return !installed || installed->rank() == 0;
}
