//===- StreamingStores.cpp - When norms write with non-temporal stores ----===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The measurement is bench/cross_core_writes.c's, shortened: a 400 x 512
// f32 buffer (a layer norm's output at 8 images of 50 tokens), each thread
// overwriting its rows after every thread has read all of them ("shared")
// or after only it has read them ("private"), medians of a few runs.
//
//===----------------------------------------------------------------------===//

#include "StreamingStores.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <vector>

extern "C" {
int32_t vmoe_streaming_stores = 0;
}

namespace {

using Clock = std::chrono::steady_clock;

/// Writes over lines other cores hold cost this many times a private write
/// or more: non-temporal stores (measured 16-18x where they pay, 4-6x where
/// they do not).
constexpr double kFactorThreshold = 10.0;
/// Seconds between measurements.
constexpr double kInterval = 2.0;
constexpr int kRows = 400, kColumns = 512, kRuns = 9;

enum class Mode { Auto, On, Off };

Mode modeFromEnvironment() {
  const char *value = std::getenv("VMOE_STREAMING_STORES");
  if (!value || !std::strcmp(value, "auto"))
    return Mode::Auto;
  return !std::strcmp(value, "on") || !std::strcmp(value, "1") ? Mode::On
                                                               : Mode::Off;
}

struct State {
  Mode mode = modeFromEnvironment();
  int calls = 0;
  Clock::time_point last;
  double factor = 0;
  std::vector<float> buffer;
};

State &state() {
  static State *instance = new State; // used until exit
  return *instance;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

/// Shared / private overwrite time of `buffer` on the OpenMP threads.
double measureFactor(std::vector<float> &buffer) {
  buffer.resize(size_t(kRows) * kColumns);
  float *data = buffer.data();
  std::vector<double> shared, privately;
  volatile float sink = 0;
#pragma omp parallel
  {
    int thread = omp_get_thread_num(), threads = omp_get_num_threads();
    int begin = kRows * thread / threads, end = kRows * (thread + 1) / threads;
    auto read = [&](int from, int to) {
      float sum = 0;
      for (size_t i = size_t(from) * kColumns; i < size_t(to) * kColumns;
           i += 16)
        sum += data[i];
      return sum;
    };
    auto overwrite = [&](float value) {
      auto start = Clock::now();
      for (size_t i = size_t(begin) * kColumns; i < size_t(end) * kColumns; ++i)
        data[i] = value;
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    for (int run = 0; run < kRuns; ++run) {
      for (bool all : {true, false}) {
        float sum = all ? read(0, kRows) : read(begin, end);
#pragma omp barrier
        double seconds = overwrite(sum * 0.0f + float(run));
#pragma omp barrier
#pragma omp critical
        {
          if (thread == 0)
            (all ? shared : privately).push_back(seconds);
          sink = sink + sum;
        }
      }
    }
  }
  double privateTime = median(privately);
  return privateTime > 0 ? median(shared) / privateTime : 0;
}

} // namespace

void vmoe::runtime::updateStreamingStores() {
  State &s = state();
  if (s.mode != Mode::Auto) {
    vmoe_streaming_stores = s.mode == Mode::On;
    return;
  }
  if (omp_get_max_threads() < 2) {
    vmoe_streaming_stores = 0;
    return;
  }
  auto now = Clock::now();
  if (s.calls++ == 0 ||
      (s.factor > 0 &&
       std::chrono::duration<double>(now - s.last).count() < kInterval))
    return;
  s.factor = measureFactor(s.buffer);
  s.last = Clock::now();
  vmoe_streaming_stores = s.factor >= kFactorThreshold;
}

double vmoe::runtime::lastCrossCoreWriteFactor() { return state().factor; }
