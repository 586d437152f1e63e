// cross_core_writes.c - what it costs threads to overwrite cache lines the
// other threads hold.
//
// A layer norm's output (400 x 512 f32 for 8 V-MoE-S/32 images) is written
// with its rows split across the threads, then read in full by every
// thread (a GEMM that splits its column panels reads all of A), so the next
// overwrite of that buffer must take each line back from the other cores.
// On some hosts that is cheap; on a VM whose vCPUs the host places on
// different core complexes it is not, and the placement can change while a
// benchmark runs. This program times, rows split over the threads:
//
//   private: y = x * a + b into a buffer only the writing thread has read;
//   shared:  the same into a buffer every thread has just read in full;
//   nt:      the shared case with non-temporal stores.
//
// Each is the median of 301 runs, in microseconds; shared / private is the
// host's cross-core write factor. On the 2-vCPU AMD EPYC VM of 2026-12-05
// it was about 5 (shared 46-54 us) or 16-18 (shared 180-230 us), switching
// from one minute to the next; in the second state a layer norm's output
// takes 0.17 instead of 0.03 ms and the dense ViT-S/32 at 8 images and two
// threads 5-6% longer. Non-temporal stores (nt) do not wait for the other
// core in either state, but leave the lines in memory for their reader.
// engine_peers.py runs this before every round of two or more threads.
//
//   clang-22 -O2 -march=native -fopenmp bench/cross_core_writes.c \
//     -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -o cross_core_writes
//   ./cross_core_writes [threads] [rows] [watch seconds]

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { kColumns = 512, kReps = 301 };

static int compareDoubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

// y[r, :] = x[r, :] * a + b over this thread's rows; non-temporal stores
// with `nt` (rows start on 64-byte boundaries).
static void writeRows(float *y, const float *x, int rows, int nt) {
  int t = omp_get_thread_num(), n = omp_get_num_threads();
  int begin = rows * t / n, end = rows * (t + 1) / n;
  for (int r = begin; r < end; ++r) {
    const float *in = x + (size_t)r * kColumns;
    float *out = y + (size_t)r * kColumns;
#if defined(__AVX512F__)
    if (nt) {
      for (int c = 0; c < kColumns; c += 16)
        _mm512_stream_ps(out + c, _mm512_fmadd_ps(_mm512_load_ps(in + c),
                                                  _mm512_set1_ps(0.5f),
                                                  _mm512_set1_ps(1.0f)));
      continue;
    }
#endif
    for (int c = 0; c < kColumns; ++c)
      out[c] = in[c] * 0.5f + 1.0f;
  }
  if (nt)
    _mm_sfence();
}

// Every thread reads all of `y` (as a panel-split GEMM reads A).
static float readAll(const float *y, int rows) {
  float sum = 0;
  for (size_t i = 0; i < (size_t)rows * kColumns; i += 16)
    sum += y[i];
  return sum;
}

// Median microseconds of one overwrite of `y` in the given case.
static double measure(float *y, const float *x, int rows, int threads,
                      int shared, int nt) {
  double times[kReps];
  volatile float sink = 0;
  for (int rep = 0; rep < kReps; ++rep) {
    if (shared) {
#pragma omp parallel num_threads(threads)
      {
        float s = readAll(y, rows);
#pragma omp atomic
        sink += s;
      }
    }
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads)
    writeRows(y, x, rows, nt);
    times[rep] = (omp_get_wtime() - t0) * 1e6;
  }
  qsort(times, kReps, sizeof(double), compareDoubles);
  return times[kReps / 2];
}

int main(int argc, char **argv) {
  int threads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
  int rows = argc > 2 ? atoi(argv[2]) : 400;
  int watch = argc > 3 ? atoi(argv[3]) : 0;
  if (threads < 2 || rows < threads || watch < 0) {
    fprintf(stderr, "cross_core_writes: usage: cross_core_writes [threads "
                    ">= 2] [rows >= threads] [watch seconds >= 0]\n");
    return 1;
  }
  size_t bytes = (size_t)rows * kColumns * sizeof(float);
  float *x = aligned_alloc(64, bytes), *y = aligned_alloc(64, bytes);
  if (!x || !y) {
    fprintf(stderr, "cross_core_writes: cannot allocate %zu bytes\n", bytes);
    return 1;
  }
  memset(y, 0, bytes);
  for (size_t i = 0; i < (size_t)rows * kColumns; ++i)
    x[i] = (float)(i & 255);
  // A new thread starts on its parent's CPU until the kernel moves it;
  // keep every thread busy until the team is spread (else the first case
  // times context switches).
  double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  while (omp_get_wtime() - start < 0.2) {
  }
  for (;;) {
    double priv = measure(y, x, rows, threads, 0, 0);
    double shared = measure(y, x, rows, threads, 1, 0);
    double nt = measure(y, x, rows, threads, 1, 1);
    printf("cross-core writes, %d threads, %d x %d f32: private %.1f us, "
           "shared %.1f us, nt %.1f us, factor %.2f\n",
           threads, rows, kColumns, priv, shared, nt, shared / priv);
    fflush(stdout);
    if (!watch)
      break;
    sleep(watch);
  }
  free(x);
  free(y);
  return 0;
}
