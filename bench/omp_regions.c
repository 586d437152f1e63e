// omp_regions.c - time every OpenMP parallel region of a program.
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM
// Exceptions.
//
// An LD_PRELOAD library that wraps libomp's __kmpc_fork_call: per outlined
// region function it adds up the calls, the wall time of the fork (fork to
// join) and, per thread, the time spent inside the region's function. The
// difference between threads x wall and the busy times is the time threads
// waited at the region's end (a static loop's closing barrier is inside
// the function, so there the wait counts as busy). Regions forked inside a
// region (serialized) count in their parent. Written at exit to
// $OMP_REGIONS_OUT (default stderr), one line per region:
//
//   <module path> <offset of the function in it> <calls> <wall s> <busy s
//   of thread 0> <busy s of thread 1> ...
//
// bench/omp_regions.py names the functions and prints the table.
//
//   clang-22 -O2 -shared -fPIC bench/omp_regions.c -o omp_regions.so -ldl
//   OMP_REGIONS_OUT=r.txt LD_PRELOAD=./omp_regions.so ./model ...

#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { kMaxRegions = 1024, kMaxThreads = 16, kMaxArgs = 8 };

typedef void (*Microtask)(int *, int *, ...);
typedef void (*ForkCall)(void *, int, Microtask, ...);

static struct {
  void *fn;
  long calls;
  double wall, busy[kMaxThreads];
} regions[kMaxRegions];
static int numRegions;
static ForkCall realFork;
static __thread int depth;

struct Fork {
  Microtask fn;
  int argc, region;
  void *args[kMaxArgs];
};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec * 1e-9;
}

static void call(const struct Fork *f, int *gtid, int *btid) {
  void *const *a = f->args;
  switch (f->argc) {
  case 0: f->fn(gtid, btid); break;
  case 1: f->fn(gtid, btid, a[0]); break;
  case 2: f->fn(gtid, btid, a[0], a[1]); break;
  case 3: f->fn(gtid, btid, a[0], a[1], a[2]); break;
  case 4: f->fn(gtid, btid, a[0], a[1], a[2], a[3]); break;
  case 5: f->fn(gtid, btid, a[0], a[1], a[2], a[3], a[4]); break;
  case 6: f->fn(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5]); break;
  case 7: f->fn(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6]); break;
  default:
    f->fn(gtid, btid, a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]);
  }
}

// The region's function on each thread, timed.
static void timed(int *gtid, int *btid, struct Fork *f) {
  ++depth;
  double t0 = now();
  call(f, gtid, btid);
  double t = now() - t0;
  --depth;
  if (f->region >= 0 && *btid < kMaxThreads)
    regions[f->region].busy[*btid] += t;
}

static void report(void) {
  const char *path = getenv("OMP_REGIONS_OUT");
  FILE *out = path ? fopen(path, "w") : stderr;
  if (!out) {
    fprintf(stderr, "omp_regions: cannot write %s\n", path);
    return;
  }
  for (int i = 0; i < numRegions; ++i) {
    Dl_info info;
    if (!dladdr(regions[i].fn, &info) || !info.dli_fname)
      continue;
    fprintf(out, "%s %lx %ld %.6f", info.dli_fname,
            (unsigned long)((char *)regions[i].fn - (char *)info.dli_fbase),
            regions[i].calls, regions[i].wall);
    for (int t = 0; t < kMaxThreads; ++t)
      fprintf(out, " %.6f", regions[i].busy[t]);
    fputc('\n', out);
  }
  if (path)
    fclose(out);
}

void __kmpc_fork_call(void *loc, int argc, Microtask fn, ...) {
  if (!realFork) {
    realFork = (ForkCall)dlsym(RTLD_NEXT, "__kmpc_fork_call");
    if (!realFork || argc < 0) {
      fprintf(stderr, "omp_regions: no __kmpc_fork_call to wrap\n");
      abort();
    }
    atexit(report);
  }
  if (argc > kMaxArgs) {
    fprintf(stderr, "omp_regions: a region with %d arguments (at most %d)\n",
            argc, kMaxArgs);
    abort();
  }
  struct Fork f = {fn, argc, -1, {0}};
  va_list ap;
  va_start(ap, fn);
  for (int i = 0; i < argc; ++i)
    f.args[i] = va_arg(ap, void *);
  va_end(ap);
  // Only outermost regions are counted; nested ones run serialized inside
  // them (and may run on both threads at once).
  if (depth == 0) {
    int i = 0;
    while (i < numRegions && regions[i].fn != (void *)fn)
      ++i;
    if (i == kMaxRegions) {
      fprintf(stderr, "omp_regions: more than %d regions\n", kMaxRegions);
      abort();
    }
    if (i == numRegions)
      regions[numRegions++].fn = (void *)fn;
    f.region = i;
  }
  double t0 = now();
  realFork(loc, 1, (Microtask)timed, &f);
  if (f.region >= 0) {
    regions[f.region].wall += now() - t0;
    ++regions[f.region].calls;
  }
}
