// Calls the entry points of examples/embedding/tiny_layer.mlir and of
// entry_points.mlir through the headers vmoe-translate --vmoe-to-c-header
// generated for them (c-header.test): the descriptor types and prototypes
// must match the compiled code's ABI, and the descriptor types both headers
// define must not clash.
#include "entry_points.h"
#include "tiny_layer.h"

#include <stdio.h>
#include <stdlib.h>

static void runLayer(double c, const char *label) {
  float xData[8] = {1, 0, 0, 1, 2, 0, 0, 0};
  int32_t idData[4], slotData[4];
  float outData[8];
  vmoe_memref_3d_f32 x = {xData, xData, 0, {1, 4, 2}, {8, 2, 1}};
  vmoe_memref_3d_i32 ids = {idData, idData, 0, {1, 4, 1}, {4, 1, 1}};
  vmoe_memref_3d_i32 slots = {slotData, slotData, 0, {1, 4, 1}, {4, 1, 1}};
  vmoe_memref_3d_f32 out = {outData, outData, 0, {1, 4, 2}, {8, 2, 1}};
  _mlir_ciface_tiny_layer(&x, c, &ids, &slots, &out);
  printf("%s ids:", label);
  for (int t = 0; t < 4; ++t)
    printf(" %d", idData[t]);
  printf("\n%s slots:", label);
  for (int t = 0; t < 4; ++t)
    printf(" %d", slotData[t]);
  printf("\n%s out:", label);
  for (int t = 0; t < 4; ++t)
    printf("%s %g %g", t ? " |" : "", outData[2 * t], outData[2 * t + 1]);
  printf("\n");
}

int main(void) {
  runLayer(1.0, "C=1.0");
  runLayer(0.5, "C=0.5");

  float values[4] = {1.5f, -2.0f, 4.0f, 0.25f};
  vmoe_memref_1d_f32 v = {values, values, 0, {4}, {1}};
  printf("sum: %g\n", _mlir_ciface_sum(&v));

  float grid[8] = {0.5f, 1, 2, 3, 4, 5, 6, 7};
  vmoe_memref_3d_f32 g = {grid, grid, 0, {1, 4, 2}, {8, 2, 1}};
  printf("first: %g\n", _mlir_ciface_first(&g));

  // Tensor arguments have the identity layout: contiguous, offset 0.
  float three[3] = {1, 2, 3};
  vmoe_memref_1d_f32 dynamic = {three, three, 0, {3}, {1}};
  vmoe_memref_1d_f32 scaled;
  _mlir_ciface_scale(&scaled, &dynamic, 2.5f);
  printf("scale: sizes %lld strides %lld:", (long long)scaled.sizes[0],
         (long long)scaled.strides[0]);
  for (int64_t i = 0; i < scaled.sizes[0]; ++i)
    printf(" %g", scaled.aligned[scaled.offset + i * scaled.strides[0]]);
  printf("\n");
  free(scaled.allocated);

  count_positive_results results;
  _mlir_ciface_count_positive(&results, &v, 2);
  printf("count_positive: %lld over %d flags", (long long)results.result0,
         (int)results.result1);
  for (int64_t i = 0; i < results.result2.sizes[0]; ++i)
    printf(" %d", results.result2.aligned[results.result2.offset + i]);
  printf("\n");
  free(results.result2.allocated);
  _mlir_ciface_count_positive(&results, &v, 3);
  printf("count_positive limit 3: %lld over %d\n", (long long)results.result0,
         (int)results.result1);
  free(results.result2.allocated);
  return 0;
}
