// panel_stream.c - how fast one-tile expert GEMMs stream their weights.
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//   clang-22 -O3 -march=native -fopenmp bench/panel_stream.c -o panel_stream
//   ./panel_stream [threads >= 1] [experts >= 1] [rounds >= 1]
//
// The expert MLPs of V-MoE-S (D = 512, H = 2048, f32) at small batch or
// capacity: each expert holds 2 or 6 rows, one register tile of 4 AVX-512
// vectors (64 columns), so its two GEMMs read every weight once from
// memory and the weight stream sets their time. `threads` threads take
// alternate experts (96 by default: the 805 MB a forward of S/32 reads at
// 8 images). Four ways to store and walk the weights:
//
//   16-wide panels [N/16][K][16], k blocks of 512 outside, panels inside:
//     vmoe before df82513 (a tile reads four panels, 64 bytes from each);
//   16-wide panels, each panel group's k blocks in turn;
//   64-wide panels [N/64][K][64], k blocks outside;
//   64-wide panels, each panel's k blocks in turn: vmoe since df82513
//     (one sequential stream per GEMM).
//
// Prints, per way and row count, the weight bytes per second (median and
// best of the rounds), the plain read rate of the same bytes, and whether
// every way computed the same outputs (the sums run in the same k order,
// so they must be equal bit for bit).

#include <immintrin.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define D 512
#define H 2048
#define KC 512
#define LANES 16
#define MAX_ROWS 6

static float *weights; // experts x (w1 [D, H] then w2 [H, D]), stored
static int experts = 96;

// Row kk of vector v of column group `group` (64 columns) of a kernel with
// k rows stored in 64-wide (`wide`) or 16-wide panels.
static inline const float *panelAt(const float *b, int k, int wide, int group,
                                   int v, int kk) {
  if (wide)
    return b + ((size_t)group * k + kk) * 64 + v * LANES;
  return b + ((size_t)(group * 4 + v) * k + kk) * LANES;
}

// c[R x N] = a[R x K] . B, one tile of R rows x 4 vectors per panel group.
#define DEFINE_GEMM(R, WIDE, PANELS_FIRST)                                     \
  static void gemm_##R##_##WIDE##_##PANELS_FIRST(                              \
      const float *a, int k, const float *b, int n, float *c) {                \
    int groups = n / 64, blocks = (k + KC - 1) / KC;                           \
    int outer = PANELS_FIRST ? groups : blocks;                                \
    int inner = PANELS_FIRST ? blocks : groups;                                \
    for (int i = 0; i < outer; ++i)                                            \
      for (int j = 0; j < inner; ++j) {                                        \
        int g = PANELS_FIRST ? i : j, k0 = (PANELS_FIRST ? j : i) * KC;        \
        int k1 = k0 + KC < k ? k0 + KC : k;                                    \
        __m512 acc[R][4];                                                      \
        for (int r = 0; r < R; ++r)                                            \
          for (int v = 0; v < 4; ++v)                                          \
            acc[r][v] = k0 ? _mm512_loadu_ps(c + r * n + g * 64 + v * LANES)   \
                           : _mm512_setzero_ps();                              \
        for (int kk = k0; kk < k1; ++kk) {                                     \
          __m512 bv[4];                                                        \
          for (int v = 0; v < 4; ++v)                                          \
            bv[v] = _mm512_load_ps(panelAt(b, k, WIDE, g, v, kk));             \
          for (int r = 0; r < R; ++r) {                                        \
            __m512 s = _mm512_set1_ps(a[r * k + kk]);                          \
            for (int v = 0; v < 4; ++v)                                        \
              acc[r][v] = _mm512_fmadd_ps(s, bv[v], acc[r][v]);                \
          }                                                                    \
        }                                                                      \
        for (int r = 0; r < R; ++r)                                            \
          for (int v = 0; v < 4; ++v)                                          \
            _mm512_storeu_ps(c + r * n + g * 64 + v * LANES, acc[r][v]);       \
      }                                                                        \
  }

DEFINE_GEMM(2, 0, 0)
DEFINE_GEMM(2, 0, 1)
DEFINE_GEMM(2, 1, 0)
DEFINE_GEMM(2, 1, 1)
DEFINE_GEMM(6, 0, 0)
DEFINE_GEMM(6, 0, 1)
DEFINE_GEMM(6, 1, 0)
DEFINE_GEMM(6, 1, 1)

typedef void (*Gemm)(const float *, int, const float *, int, float *);

struct Way {
  const char *name;
  int rows, wide;
  Gemm gemm;
  float out[MAX_ROWS * D]; // expert 0's output, for the check
  double seconds[64];
};

// Packs expert e's plain kernel w [k, n] (value(k, n)) as `wide` panels.
static void pack(float *dst, int k, int n, int wide, int e, int which) {
  for (int kk = 0; kk < k; ++kk)
    for (int nn = 0; nn < n; ++nn) {
      // Small integers times 2^-10: every product and sum exact.
      float value = (float)((kk * 7 + nn * 3 + e * 5 + which) % 9 - 4) / 1024;
      size_t at = wide ? ((size_t)(nn / 64) * k + kk) * 64 + nn % 64
                       : ((size_t)(nn / 16) * k + kk) * 16 + nn % 16;
      dst[at] = value;
    }
}

static double forward(struct Way *way, int threads, int store) {
  double start = omp_get_wtime();
#pragma omp parallel num_threads(threads)
  {
    static __thread float x[MAX_ROWS * D], hidden[MAX_ROWS * H],
        y[MAX_ROWS * D];
    for (int i = 0; i < MAX_ROWS * D; ++i)
      x[i] = (float)(i % 5 - 2);
    for (int e = omp_get_thread_num(); e < experts; e += threads) {
      const float *w = weights + (size_t)e * 2 * D * H;
      way->gemm(x, D, w, H, hidden);
      way->gemm(hidden, H, w + (size_t)D * H, D, y);
      if (store && e == 0)
        memcpy(way->out, y, sizeof(float) * way->rows * D);
    }
  }
  return omp_get_wtime() - start;
}

static double readAll(int threads) {
  size_t n = (size_t)experts * 2 * D * H;
  double start = omp_get_wtime();
  float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
  {
    __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
    for (size_t i = 0; i < n; i += 64) {
      s0 = _mm512_add_ps(s0, _mm512_load_ps(weights + i));
      s1 = _mm512_add_ps(s1, _mm512_load_ps(weights + i + 16));
      s2 = _mm512_add_ps(s2, _mm512_load_ps(weights + i + 32));
      s3 = _mm512_add_ps(s3, _mm512_load_ps(weights + i + 48));
    }
    total += _mm512_reduce_add_ps(
        _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
  }
  volatile float sink = total;
  (void)sink;
  return omp_get_wtime() - start;
}

static int compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static int parse(const char *text, int *value) {
  char *end;
  long v = strtol(text, &end, 10);
  if (*end || v < 1 || v > 1 << 20)
    return 0;
  *value = (int)v;
  return 1;
}

int main(int argc, char **argv) {
  int threads = 1, rounds = 7;
  if (argc > 4 || (argc > 1 && !parse(argv[1], &threads)) ||
      (argc > 2 && !parse(argv[2], &experts)) ||
      (argc > 3 && (!parse(argv[3], &rounds) || rounds > 64))) {
    fprintf(stderr, "panel_stream: usage: panel_stream [threads >= 1] "
                    "[experts >= 1] [rounds 1..64]\n");
    return 2;
  }
  size_t floats = (size_t)experts * 2 * D * H, bytes = floats * 4;
  size_t huge = (size_t)2 << 20;
  char *region = mmap(NULL, 2 * bytes + huge, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) {
    fprintf(stderr, "panel_stream: cannot map %zu MB\n", 2 * bytes >> 20);
    return 1;
  }
  float *aligned = (float *)(((size_t)region + huge - 1) & ~(huge - 1));
  madvise(aligned, 2 * bytes, MADV_HUGEPAGE);
  float *narrow = aligned, *wide = aligned + floats;
  for (int e = 0; e < experts; ++e)
    for (int layout = 0; layout < 2; ++layout) {
      float *w = (layout ? wide : narrow) + (size_t)e * 2 * D * H;
      pack(w, D, H, layout, e, 0);
      pack(w + (size_t)D * H, H, D, layout, e, 1);
    }

  static struct Way ways[] = {
      {.name = "16-wide panels, k blocks outside", .rows = 2, .wide = 0, .gemm = gemm_2_0_0},
      {.name = "16-wide panels, panels outside", .rows = 2, .wide = 0, .gemm = gemm_2_0_1},
      {.name = "64-wide panels, k blocks outside", .rows = 2, .wide = 1, .gemm = gemm_2_1_0},
      {.name = "64-wide panels, panels outside", .rows = 2, .wide = 1, .gemm = gemm_2_1_1},
      {.name = "16-wide panels, k blocks outside", .rows = 6, .wide = 0, .gemm = gemm_6_0_0},
      {.name = "16-wide panels, panels outside", .rows = 6, .wide = 0, .gemm = gemm_6_0_1},
      {.name = "64-wide panels, k blocks outside", .rows = 6, .wide = 1, .gemm = gemm_6_1_0},
      {.name = "64-wide panels, panels outside", .rows = 6, .wide = 1, .gemm = gemm_6_1_1},
  };
  int count = sizeof ways / sizeof *ways;
  double read[64];
  for (int r = 0; r < rounds; ++r) {
    weights = narrow;
    read[r] = readAll(threads);
    for (int i = 0; i < count; ++i) {
      weights = ways[i].wide ? wide : narrow;
      ways[i].seconds[r] = forward(&ways[i], threads, r == 0);
    }
  }
  qsort(read, rounds, sizeof(double), compare);
  printf("panel_stream: %d threads, %d experts, %zu MB, %d rounds\n", threads,
         experts, bytes >> 20, rounds);
  printf("plain read: %.1f GB/s (best %.1f)\n", bytes / read[rounds / 2] / 1e9,
         bytes / read[0] / 1e9);
  int same = 1;
  for (int i = 0; i < count; ++i) {
    qsort(ways[i].seconds, rounds, sizeof(double), compare);
    printf("rows %d, %s: %.1f GB/s (best %.1f)\n", ways[i].rows, ways[i].name,
           bytes / ways[i].seconds[rounds / 2] / 1e9,
           bytes / ways[i].seconds[0] / 1e9);
    const struct Way *first = &ways[i < 4 ? 0 : 4];
    same &= !memcmp(first->out, ways[i].out, sizeof(float) * first->rows * D);
  }
  printf("outputs: %s\n", same ? "equal" : "DIFFER");
  return same ? 0 : 1;
}
