// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of vmoe.soft_moe in its custom and generic forms.

// CHECK-LABEL: func.func @soft_moe
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} {activation = #vmoe.activation<gelu_erf>}
// CHECK-SAME: : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>, tensor<128x768x3072xf32>, tensor<128x3072xf32>, tensor<128x3072x768xf32>, tensor<128x768xf32>
func.func @soft_moe(%x: tensor<8x197x768xf32>, %phi: tensor<768x128x1xf32>, %scale: tensor<f32>,
    %w1: tensor<128x768x3072xf32>, %b1: tensor<128x3072xf32>, %w2: tensor<128x3072x768xf32>,
    %b2: tensor<128x768xf32>) -> tensor<8x197x768xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<gelu_erf>}
      : tensor<8x197x768xf32>, tensor<768x128x1xf32>, tensor<f32>, tensor<128x768x3072xf32>,
        tensor<128x3072xf32>, tensor<128x3072x768xf32>, tensor<128x768xf32>
  return %o : tensor<8x197x768xf32>
}

// -----

// CHECK-LABEL: func.func @soft_moe_dynamic_groups_default_activation
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} :
// CHECK-SAME: tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>
func.func @soft_moe_dynamic_groups_default_activation(%x: tensor<?x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>) -> tensor<?x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2
      : tensor<?x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<?x5x10xf32>
}

// -----

// CHECK-LABEL: func.func @soft_moe_valid
// CHECK: vmoe.soft_moe %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} valid(%{{.*}}) {activation = #vmoe.activation<relu>} :
func.func @soft_moe_valid(%x: tensor<2x5x10xf32>, %phi: tensor<10x8x2xf32>,
    %scale: tensor<f32>, %w1: tensor<8x10x12xf32>, %b1: tensor<8x12xf32>, %w2: tensor<8x12x10xf32>,
    %b2: tensor<8x10xf32>, %n: index) -> tensor<2x5x10xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %w1, %b1, %w2, %b2 valid(%n) {activation = #vmoe.activation<relu>}
      : tensor<2x5x10xf32>, tensor<10x8x2xf32>, tensor<f32>, tensor<8x10x12xf32>, tensor<8x12xf32>,
        tensor<8x12x10xf32>, tensor<8x10xf32>
  return %o : tensor<2x5x10xf32>
}
