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

bool vmoe::runtime::agreeToRun(bool ok) {
  return installed ? installed->agree(ok) : ok;
}

bool vmoe::runtime::isPrintingProcess() {
  return !installed || installed->rank() == 0;
}
