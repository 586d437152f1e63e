// machine_peaks.c - what the CPU can do at most, to read benchmarks against.
//
// Prints, for 1..N OpenMP threads: the f32 FMA rate of independent
// register-only FMA chains (the ceiling of any f32 GEMM microkernel: no
// memory traffic), and the read bandwidth of a sum over a 1 GiB array (the
// ceiling of streaming expert weights once per call). The array is in
// 2 MB pages where the kernel grants them (MADV_HUGEPAGE), as the runtime's
// weights are. Uses the widest vectors the compiler targets (-march=native:
// AVX-512 or AVX2).
//
//   clang-22 -O2 -march=native -fopenmp bench/machine_peaks.c \
//     -L/usr/lib/llvm-22/lib -Wl,-rpath,/usr/lib/llvm-22/lib -o machine_peaks
//   ./machine_peaks [max threads]
//   ./machine_peaks --read threads [MiB]   (the read bandwidth alone, one
//                                           line; engine_peers.py's sweep)

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define VSET1 _mm512_set1_ps
#define VFMA _mm512_fmadd_ps
#define VADD _mm512_add_ps
#define VLOAD _mm512_load_ps
#define VZERO _mm512_setzero_ps
static float vsum(vec v) { return _mm512_reduce_add_ps(v); }
#else
typedef __m256 vec;
#define LANES 8
#define VSET1 _mm256_set1_ps
#define VFMA _mm256_fmadd_ps
#define VADD _mm256_add_ps
#define VLOAD _mm256_load_ps
#define VZERO _mm256_setzero_ps
static float vsum(vec v) {
  float f[8];
  _mm256_storeu_ps(f, v);
  return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}
#endif

enum { kChains = 12, kRepeats = 5 };

// GFLOP/s of all threads together: kChains independent FMA chains each.
static double fmaRate(int threads) {
  const long iters = 50000000L;
  double best = 1e30;
  for (int rep = 0; rep < kRepeats; ++rep) {
    float sink = 0;
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    {
      vec acc[kChains];
      vec x = VSET1(0.999f), y = VSET1(1e-7f);
      for (int i = 0; i < kChains; ++i)
        acc[i] = VSET1((float)i);
      for (long it = 0; it < iters; ++it)
        for (int i = 0; i < kChains; ++i)
          acc[i] = VFMA(acc[i], x, y);
      for (int i = 0; i < kChains; ++i)
        sink += vsum(acc[i]);
    }
    double t = omp_get_wtime() - t0;
    if (t < best)
      best = t;
    if (sink == 12345.0f) // keep the chains
      puts("");
  }
  return threads * (double)iters * kChains * LANES * 2 / best / 1e9;
}

// GB/s of a parallel sum over `n` floats.
static double readRate(const float *a, size_t n, int threads) {
  double best = 1e30;
  for (int rep = 0; rep < kRepeats; ++rep) {
    float total = 0;
    double t0 = omp_get_wtime();
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      vec s0 = VZERO(), s1 = VZERO(), s2 = VZERO(), s3 = VZERO();
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 4 * LANES) {
        s0 = VADD(s0, VLOAD(a + i));
        s1 = VADD(s1, VLOAD(a + i + LANES));
        s2 = VADD(s2, VLOAD(a + i + 2 * LANES));
        s3 = VADD(s3, VLOAD(a + i + 3 * LANES));
      }
      total += vsum(VADD(VADD(s0, s1), VADD(s2, s3)));
    }
    double t = omp_get_wtime() - t0;
    if (t < best)
      best = t;
    if (total == 12345.0f)
      puts("");
  }
  return n * sizeof(float) / best / 1e9;
}

// `bytes` (a multiple of 2 MB) on a 2 MB boundary, advised into huge
// pages, written once; NULL when out of memory.
static float *allocArray(size_t bytes) {
  size_t huge = (size_t)2 << 20;
  float *a = aligned_alloc(huge, bytes);
  if (!a)
    return NULL;
#ifdef MADV_HUGEPAGE
  madvise(a, bytes, MADV_HUGEPAGE);
#endif
  size_t n = bytes / sizeof(float);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i)
    a[i] = (float)(i & 1023);
  return a;
}

static int usage(void) {
  fprintf(stderr, "machine_peaks: usage: machine_peaks [max threads >= 1] | "
                  "--read threads [MiB >= 2, even]\n");
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "--read") == 0) {
    int threads = argc > 2 ? atoi(argv[2]) : 0;
    long mib = argc > 3 ? atol(argv[3]) : 1024;
    if (argc < 3 || argc > 4 || threads < 1 || mib < 2 || mib % 2)
      return usage();
    size_t bytes = (size_t)mib << 20;
    float *a = allocArray(bytes);
    if (!a) {
      fprintf(stderr, "machine_peaks: cannot allocate %ld MiB\n", mib);
      return 1;
    }
    printf("read, %d threads, %ld MiB: %.1f GB/s\n", threads, mib,
           readRate(a, bytes / sizeof(float), threads));
    free(a);
    return 0;
  }
  int maxThreads = argc > 1 ? atoi(argv[1]) : omp_get_num_procs();
  if (argc > 2 || maxThreads < 1)
    return usage();
  size_t n = (size_t)1 << 28; // 1 GiB
  float *a = allocArray(n * sizeof(float));
  if (!a) {
    fprintf(stderr, "machine_peaks: cannot allocate 1 GiB\n");
    return 1;
  }
  printf("%d-lane f32 vectors; best of %d runs\n", LANES, kRepeats);
  printf("threads  fma GFLOP/s  per thread  read GB/s\n");
  double one = 0;
  for (int t = 1; t <= maxThreads; ++t) {
    double rate = fmaRate(t);
    if (t == 1)
      one = rate;
    printf("%7d  %11.1f  %10.1f  %9.1f   (fma %.2fx one thread)\n", t, rate,
           rate / t, readRate(a, n, t), rate / one);
  }
  free(a);
  return 0;
}
