// Calls the entry points of examples/embedding/tiny_layer.mlir and of
// entry_points.mlir through the headers vmoe-translate --vmoe-to-c-header
// generated for them (c-header.test): the descriptor types and prototypes
// must match the compiled code's ABI, and the descriptor types both headers
// define must not clash.
#include "entry_points.h"
#include "tiny_layer.h"

#include <stdio.h>
#include <stdlib.h>

int main(void) {
  // The layer at C = 0.5: one slot per expert, tokens 0 and 3 dropped.
  float xs[8] = {1, 0, 0, 1, 2, 0, 0, 0}, outs[8];
  int32_t ids[4], slots[4];
  vmoe_memref_3d_f32 x = {xs, xs, 0, {1, 4, 2}, {8, 2, 1}};
  vmoe_memref_3d_f32 out = {outs, outs, 0, {1, 4, 2}, {8, 2, 1}};
  vmoe_memref_3d_i32 idsDesc = {ids, ids, 0, {1, 4, 1}, {4, 1, 1}};
  vmoe_memref_3d_i32 slotsDesc = {slots, slots, 0, {1, 4, 1}, {4, 1, 1}};
  _mlir_ciface_tiny_layer(&x, 0.5, &idsDesc, &slotsDesc, &out);
  printf("tiny_layer: ids %d %d %d %d slots %d %d %d %d token 1 out %g, token 2 out %g\n",
         ids[0], ids[1], ids[2], ids[3], slots[0], slots[1], slots[2],
         slots[3], outs[3], outs[4]);

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
