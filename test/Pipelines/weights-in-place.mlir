// RUN: vmoe-opt %s -convert-vmoe-to-scf \
// RUN:   -one-shot-bufferize="bufferize-function-boundaries function-boundary-type-conversion=identity-layout-map" \
// RUN:   | FileCheck %s

// Compiled models take all weights as one flat buffer and slice each tensor
// out of it (lib/Frontend/Layers.cpp). The expert weights must be read
// in place: a copy costs E x D x H floats per layer and call (128 MiB per
// matrix for V-MoE-S/32, which made the model 3x slower).

// CHECK-LABEL: func.func @sliced_weights
// CHECK-NOT: memref.copy
// CHECK-NOT: memref.alloc() {{.*}} : memref<4x16x32xf32>
// CHECK-NOT: memref.alloc() {{.*}} : memref<4x32x16xf32>
// CHECK: memref.subview %{{.*}}[0] [2048] [1]
// CHECK: memref.expand_shape
// CHECK-NOT: memref.copy
// CHECK: return
func.func @sliced_weights(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x3xi32>, %f: tensor<4x1xi32>, %weights: tensor<4352xf32>) -> tensor<1x8x16xf32> {
  %w1f = tensor.extract_slice %weights[0] [2048] [1] : tensor<4352xf32> to tensor<2048xf32>
  %b1f = tensor.extract_slice %weights[2048] [128] [1] : tensor<4352xf32> to tensor<128xf32>
  %w2f = tensor.extract_slice %weights[2176] [2048] [1] : tensor<4352xf32> to tensor<2048xf32>
  %b2f = tensor.extract_slice %weights[4224] [64] [1] : tensor<4352xf32> to tensor<64xf32>
  %w1 = tensor.expand_shape %w1f [[0, 1, 2]] output_shape [4, 16, 32] : tensor<2048xf32> into tensor<4x16x32xf32>
  %b1 = tensor.expand_shape %b1f [[0, 1]] output_shape [4, 32] : tensor<128xf32> into tensor<4x32xf32>
  %w2 = tensor.expand_shape %w2f [[0, 1, 2]] output_shape [4, 32, 16] : tensor<2048xf32> into tensor<4x32x16xf32>
  %b2 = tensor.expand_shape %b2f [[0, 1]] output_shape [4, 16] : tensor<64xf32> into tensor<4x16xf32>
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x3xi32>, tensor<4x1xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}
