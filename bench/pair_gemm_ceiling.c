// pair_gemm_ceiling.c - what the bf16 pair GEMMs of vmoe-compile can reach.
//
// The blocking that emitGemm generates for --precision=bf16 (Codegen/
// Microkernel.cpp), written by hand with intrinsics: A rounded to bf16
// pairs, rows [M][K/2] words; B in pair panels of 16 lanes [N/16][K/2][16]
// (the weights' layout after the runtime packs them); for each column
// panel of 64, each k block of 512, each tile of 6 rows: 24 accumulators,
// 4 B vectors and 6 broadcasts per pair of k, the next panel prefetched.
// No rounding, no epilogue, no threads: the ceiling of the generated main
// loops on the model's shapes, printed beside the register-only vdpbf16ps
// rate (no memory at all). Needs AVX512_BF16.
//
//   clang-22 -O2 -march=native bench/pair_gemm_ceiling.c -o pair_gemm_ceiling
//   ./pair_gemm_ceiling [repeats]

#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#if !defined(__AVX512BF16__)
#error "pair_gemm_ceiling needs AVX512_BF16 (-march=native on such a host)"
#endif

enum { ROWS = 6, VECTORS = 4, LANES = 16, KC = 512 };

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

// One tile: rows [0, ROWS) of `a` (row stride `lda` words) times the four
// 16-lane panels at `b` (panel stride `ldb` words) over pairs [p0, p1).
static void tile(const int32_t *a, long lda, const int32_t *b, long ldb,
                 long p0, long p1, float *c, long ldc, int first) {
  __m512 acc[ROWS][VECTORS];
  for (int i = 0; i < ROWS; ++i)
    for (int v = 0; v < VECTORS; ++v)
      acc[i][v] = first ? _mm512_setzero_ps()
                        : _mm512_loadu_ps(c + i * ldc + v * LANES);
  for (long p = p0; p < p1; ++p) {
    __m512bh bv[VECTORS];
    for (int v = 0; v < VECTORS; ++v) {
      bv[v] = (__m512bh)_mm512_loadu_si512(b + v * ldb + p * LANES);
      _mm_prefetch((const char *)(b + (v + VECTORS) * ldb + p * LANES),
                   _MM_HINT_T1);
    }
    for (int i = 0; i < ROWS; ++i) {
      __m512bh av = (__m512bh)_mm512_set1_epi32(a[i * lda + p]);
      for (int v = 0; v < VECTORS; ++v)
        acc[i][v] = _mm512_dpbf16_ps(acc[i][v], av, bv[v]);
    }
  }
  for (int i = 0; i < ROWS; ++i)
    for (int v = 0; v < VECTORS; ++v)
      _mm512_storeu_ps(c + i * ldc + v * LANES, acc[i][v]);
}

// C[m][n] = A[m][k] B[k][n] over full tiles (m a multiple of ROWS, n of 64).
static void gemm(const int32_t *a, const int32_t *b, float *c, long m, long n,
                 long k) {
  long words = k / 2, block = KC / 2, width = VECTORS * LANES;
  for (long panel = 0; panel < n / width; ++panel)
    for (long p0 = 0; p0 < words; p0 += block)
      for (long row = 0; row < m; row += ROWS)
        tile(a + row * words, words, b + panel * VECTORS * words * LANES,
             words * LANES, p0, p0 + block, c + row * n + panel * width, n,
             p0 == 0);
}

static int32_t *randomPairs(size_t count) {
  int32_t *p = aligned_alloc(64, (count * 4 + 63) / 64 * 64);
  // bf16 pairs with exponents below 2^1: no infinities, no NaN.
  for (size_t i = 0; i < count; ++i)
    p[i] = (int32_t)((uint32_t)rand() & 0xbfffbfffu);
  return p;
}

// Register-only vdpbf16ps: 24 independent accumulators.
static double registerPeak(void) {
  __m512bh x = (__m512bh)_mm512_set1_epi32(0x3f803f80);
  __m512bh y = (__m512bh)_mm512_set1_epi32(0x3c003c00);
  __m512 acc[24];
  for (int i = 0; i < 24; ++i)
    acc[i] = _mm512_setzero_ps();
  long steps = 100000000;
  double start = now();
  for (long s = 0; s < steps; ++s) {
    __asm__ volatile("" : "+v"(x), "+v"(y));
    for (int i = 0; i < 24; ++i)
      acc[i] = _mm512_dpbf16_ps(acc[i], x, y);
  }
  double seconds = now() - start;
  float sum = 0;
  for (int i = 0; i < 24; ++i)
    sum += _mm512_reduce_add_ps(acc[i]);
  if (sum == 1.0f)
    printf(" ");
  return 24.0 * 64 * steps / seconds / 1e9;
}

int main(int argc, char **argv) {
  int repeats = argc > 1 ? atoi(argv[1]) : 5;
  if (repeats < 1) {
    fprintf(stderr, "pair_gemm_ceiling: repeats must be >= 1\n");
    return 1;
  }
  // V-MoE-S/32 at 32 images (1596 = 1600 rows rounded down to tiles):
  // qkv, fc1, fc2 of a dense block, and one expert's two GEMMs at 102 rows.
  struct { const char *name; long m, n, k; } shapes[] = {
      {"qkv 1596x1536x512", 1596, 1536, 512},
      {"fc1 1596x2048x512", 1596, 2048, 512},
      {"fc2 1596x512x2048", 1596, 512, 2048},
      {"expert up 102x2048x512", 102, 2048, 512},
      {"expert down 102x512x2048", 102, 512, 2048},
  };
  double peak = registerPeak();
  printf("register-only vdpbf16ps: %.1f GFLOP/s\n", peak);
  printf("%-26s %10s %8s\n", "shape (m x n x k)", "GFLOP/s", "of peak");
  for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
    long m = shapes[s].m, n = shapes[s].n, k = shapes[s].k;
    int32_t *a = randomPairs((size_t)m * k / 2);
    // One more panel block than used: the last tile's prefetches stay in.
    int32_t *b = randomPairs((size_t)(n + 64) * k / 2);
    float *c = aligned_alloc(64, (size_t)m * n * 4);
    double best = 1e30;
    for (int r = 0; r < repeats; ++r) {
      double start = now();
      gemm(a, b, c, m, n, k);
      double seconds = now() - start;
      best = seconds < best ? seconds : best;
    }
    double rate = 2.0 * m * n * k / best / 1e9;
    printf("%-26s %10.1f %7.1f%%  (c[0] %g)\n", shapes[s].name, rate,
           100 * rate / peak, c[0]);
    free(a);
    free(b);
    free(c);
  }
  return 0;
}
