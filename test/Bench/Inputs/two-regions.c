// Two parallel regions, three calls each: a loop split over the threads,
// and a region where only thread 0 works (the others wait at its end).
#include <omp.h>
#include <stdio.h>

int main(void) {
  double sum = 0;
  for (int call = 0; call < 3; ++call) {
#pragma omp parallel for reduction(+ : sum)
    for (int i = 0; i < 100000; ++i)
      sum += i * 0.5;
#pragma omp parallel
    {
      if (omp_get_thread_num() == 0)
        for (volatile int i = 0; i < 1000000; ++i)
          ;
    }
  }
  printf("%g\n", sum);
  return 0;
}
