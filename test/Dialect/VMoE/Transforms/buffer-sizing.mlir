// RUN: vmoe-opt %s -split-input-file -vmoe-buffer-sizing -verify-diagnostics | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-buffer-sizing="capacity-ratio=2.0 multiple-of=8" -verify-diagnostics \
// RUN:   | FileCheck %s --check-prefix=OVERRIDE

// The paper's V-MoE-S setting: round(2*400*1.05/32) = round(26.25) = 26. The
// static type flows into expert_ffn; combine accepts it as is.
// CHECK-LABEL: func.func @size_round
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}}, %{{.*}} {capacity = 26 : i64}
// CHECK-SAME: -> tensor<32x2x26x512xf32>, tensor<2x400x2xi32>
// CHECK: vmoe.expert_ffn %{{.*}} : tensor<32x2x26x512xf32>
// CHECK: vmoe.combine %{{.*}} : tensor<32x2x26x512xf32>,
// OVERRIDE-LABEL: func.func @size_round
// OVERRIDE: {capacity = 56 : i64, multiple_of = 8 : i64}
func.func @size_round(%x: tensor<2x400x512xf32>, %ids: tensor<2x400x2xi32>, %o: tensor<2x400xi32>,
    %w: tensor<2x400x2xf32>, %w1: tensor<32x512x64xf32>, %b1: tensor<32x64xf32>,
    %w2: tensor<32x64x512xf32>, %b2: tensor<32x512xf32>) -> tensor<2x400x512xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity_ratio = 1.05 : f64}
      : tensor<2x400x512xf32>, tensor<2x400x2xi32>, tensor<2x400xi32> -> tensor<32x2x?x512xf32>, tensor<2x400x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<32x2x?x512xf32>, tensor<32x512x64xf32>, tensor<32x64xf32>, tensor<32x64x512xf32>, tensor<32x512xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<32x2x?x512xf32>, tensor<2x400x2xi32>, tensor<2x400x2xi32>, tensor<2x400x2xf32> -> tensor<2x400x512xf32>
  return %out : tensor<2x400x512xf32>
}

// -----

// Ties go to even: 2*50*1.0/8 = 12.5 -> 12.
// CHECK-LABEL: func.func @size_ties_to_even
// CHECK: {capacity = 12 : i64} {{.*}} -> tensor<8x1x12x16xf32>
func.func @size_ties_to_even(%x: tensor<1x50x16xf32>, %ids: tensor<1x50x2xi32>) -> tensor<1x50x2xi32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x50x16xf32>, tensor<1x50x2xi32> -> tensor<8x1x?x16xf32>, tensor<1x50x2xi32>
  return %slots : tensor<1x50x2xi32>
}

// -----

// ceil, then a multiple of 4: 2*32*1.0/32 = 2 -> 4.
// CHECK-LABEL: func.func @size_ceil_multiple_of
// CHECK: {capacity = 4 : i64, capacity_rule = #vmoe.capacity_rule<ceil>, multiple_of = 4 : i64} {{.*}} -> tensor<32x1x4x8xf32>
func.func @size_ceil_multiple_of(%x: tensor<1x32x8xf32>, %ids: tensor<1x32x2xi32>) -> tensor<1x32x2xi32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64, capacity_rule = #vmoe.capacity_rule<ceil>, multiple_of = 4 : i64}
      : tensor<1x32x8xf32>, tensor<1x32x2xi32> -> tensor<32x1x?x8xf32>, tensor<1x32x2xi32>
  return %slots : tensor<1x32x2xi32>
}

// -----

// Users other than expert_ffn and combine keep the type they had.
// CHECK-LABEL: func.func @size_cast_for_other_users
// CHECK: %[[B:.*]], %{{.*}} = vmoe.dispatch {{.*}} -> tensor<4x1x4x8xf32>
// CHECK: %[[C:.*]] = tensor.cast %[[B]] : tensor<4x1x4x8xf32> to tensor<4x1x?x8xf32>
// CHECK: return %[[C]]
func.func @size_cast_for_other_users(%x: tensor<1x8x8xf32>, %ids: tensor<1x8x2xi32>) -> tensor<4x1x?x8xf32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.0 : f64}
      : tensor<1x8x8xf32>, tensor<1x8x2xi32> -> tensor<4x1x?x8xf32>, tensor<1x8x2xi32>
  return %buf : tensor<4x1x?x8xf32>
}

// -----

// A runtime capacity stays; B becomes the compiled maximum.
// CHECK-LABEL: func.func @size_runtime_capacity
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}} capacity(%{{.*}}) {capacity = 26 : i64}
func.func @size_runtime_capacity(%x: tensor<1x400x8xf32>, %ids: tensor<1x400x2xi32>, %b: index) -> tensor<1x400x2xi32> {
  %buf, %slots = vmoe.dispatch %x, %ids capacity(%b) {capacity_ratio = 1.05 : f64}
      : tensor<1x400x8xf32>, tensor<1x400x2xi32> -> tensor<32x1x?x8xf32>, tensor<1x400x2xi32>
  return %slots : tensor<1x400x2xi32>
}

// -----

/// Already sized: the static capacity is kept, and so is the type.
// CHECK-LABEL: func.func @negative_already_sized
// CHECK: {capacity = 3 : i64} {{.*}} -> tensor<4x1x3x8xf32>
// OVERRIDE-LABEL: func.func @negative_already_sized
// OVERRIDE: {capacity = 3 : i64} {{.*}} -> tensor<4x1x3x8xf32>
func.func @negative_already_sized(%x: tensor<1x8x8xf32>, %ids: tensor<1x8x2xi32>) -> tensor<1x8x2xi32> {
  %buf, %slots = vmoe.dispatch %x, %ids {capacity = 3 : i64}
      : tensor<1x8x8xf32>, tensor<1x8x2xi32> -> tensor<4x1x3x8xf32>, tensor<1x8x2xi32>
  return %slots : tensor<1x8x2xi32>
}

// -----

/// Other ops are not touched.
// CHECK-LABEL: func.func @negative_no_dispatch
// CHECK-NEXT: vmoe.bpr_sort
func.func @negative_no_dispatch(%g: tensor<1x8x4xf32>) -> tensor<1x8xi32> {
  %o = vmoe.bpr_sort %g : tensor<1x8x4xf32> -> tensor<1x8xi32>
  return %o : tensor<1x8xi32>
}
