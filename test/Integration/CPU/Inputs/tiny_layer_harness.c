// C harness of c-harness.mlir: calls the compiled layer through the MLIR C
// interface (pointers to memref descriptors) and prints its results.
#include <stdint.h>
#include <stdio.h>

#define DESCRIPTOR(T, RANK)                                                   \
  struct {                                                                    \
    T *allocated;                                                             \
    T *aligned;                                                               \
    int64_t offset;                                                           \
    int64_t sizes[RANK];                                                      \
    int64_t strides[RANK];                                                    \
  }

typedef DESCRIPTOR(float, 3) F32x3;
typedef DESCRIPTOR(int32_t, 3) I32x3;

void _mlir_ciface_tiny_layer(F32x3 *x, double c, I32x3 *ids, I32x3 *slots,
                             F32x3 *out);

static void run(double c, const char *label) {
  float xData[8] = {1, 0, 0, 1, 2, 0, 0, 0};
  int32_t idData[4], slotData[4];
  float outData[8];
  F32x3 x = {xData, xData, 0, {1, 4, 2}, {8, 2, 1}};
  I32x3 ids = {idData, idData, 0, {1, 4, 1}, {4, 1, 1}};
  I32x3 slots = {slotData, slotData, 0, {1, 4, 1}, {4, 1, 1}};
  F32x3 out = {outData, outData, 0, {1, 4, 2}, {8, 2, 1}};
  _mlir_ciface_tiny_layer(&x, c, &ids, &slots, &out);
  printf("%s ids:", label);
  for (int t = 0; t < 4; ++t)
    printf(" %d", idData[t]);
  printf("\n%s slots:", label);
  for (int t = 0; t < 4; ++t)
    printf(" %d", slotData[t]);
  printf("\n%s out:", label);
  for (int t = 0; t < 4; ++t)
    printf("%s %f %f", t ? " |" : "", outData[2 * t], outData[2 * t + 1]);
  printf("\n");
}

int main(void) {
  run(1.0, "C=1.0");
  run(0.5, "C=0.5");
  return 0;
}
