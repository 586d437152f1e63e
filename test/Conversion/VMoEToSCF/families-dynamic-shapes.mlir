// RUN: vmoe-opt %s --vmoe-lower-to-cpu | FileCheck %s

// The expert choice and Soft MoE lowerings with dynamic groups, tokens,
// widths, experts and slots go all the way to the LLVM dialect (the sizes
// come from the operands at run time).
// CHECK-NOT: vmoe.
// CHECK-DAG: llvm.func @ec(
// CHECK-DAG: llvm.func @soft(
// CHECK-DAG: llvm.func @soft_dyn_phi(
// CHECK-NOT: vmoe.

func.func @ec(%x: tensor<?x?x16xf32>, %r: tensor<16x4xf32>, %w1: tensor<4x16x32xf32>,
    %b1: tensor<4x32xf32>, %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<?x?x16xf32> {
  %gates, %tokens, %slots = vmoe.expert_choice %x, %r
      : tensor<?x?x16xf32>, tensor<16x4xf32> -> tensor<?x?x4xf32>, tensor<4x?x3xi32>, tensor<?x?x4xi32>
  %o = vmoe.expert_choice_experts %x, %gates, %tokens, %slots, %w1, %b1, %w2, %b2
      : tensor<?x?x16xf32>, tensor<?x?x4xf32>, tensor<4x?x3xi32>, tensor<?x?x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<?x?x16xf32>
}
func.func @soft(%x: tensor<?x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>) -> tensor<?x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<?x5x10xf32>
}
func.func @soft_dyn_phi(%x: tensor<2x5x10xf32>, %phi: tensor<10x?x?xf32>,
    %scale: tensor<f32>, %w1: tensor<?x10x12xf32>, %b1: tensor<?x12xf32>, %w2: tensor<?x12x10xf32>,
    %b2: tensor<?x10xf32>) -> tensor<2x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<2x5x10xf32>, tensor<10x?x?xf32>, tensor<f32>, tensor<?x10x12xf32>, tensor<?x12xf32>,
        tensor<?x12x10xf32>, tensor<?x10xf32>
  return %o : tensor<2x5x10xf32>
}
