// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s
// RUN: not vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=32" \
// RUN:   -o /dev/null 2>&1 | FileCheck %s --check-prefix=BAD

// Expert choice and Soft MoE experts with weights in panel layout read them
// in place: no packing scratch at all in the expert GEMMs, every B vector a
// load from the panels at [e, n / 16, k, n % 16]. Without panels, the GEMMs
// of one loop iteration pack B into one block scratch on the stack
// (memref.alloca marked vmoe.stack_scratch, 512 KB), never a memref.alloc.

// CHECK-LABEL: func.func @expert_choice_experts_panels
// CHECK-NOT: memref.alloca
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x2x16x16xf32, {{.*}}>, vector<8xf32>
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x1x32x16xf32, {{.*}}>, vector<8xf32>
// CHECK-NOT: memref.alloca
// CHECK: return
// BAD: error: 'vmoe.expert_choice_experts' op weight_panels (16) must be a multiple of the vector width (32) to be lowered
func.func @expert_choice_experts_panels(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %p1: tensor<4x2x16x16xf32>, %b1: tensor<4x32xf32>, %p2: tensor<4x1x32x16xf32>,
    %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %p1, %b1, %p2, %b2 {weight_panels = 16 : i64}
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x2x16x16xf32>, tensor<4x32xf32>, tensor<4x1x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

/// Plain weights: one stack scratch per expert (in its forall iteration)
/// shared by both GEMMs; no heap scratch of panels.
// CHECK-LABEL: func.func @expert_choice_experts_plain
// CHECK: scf.forall
// CHECK-COUNT-1: memref.alloca() {alignment = 64 : i64, vmoe.stack_scratch} : memref<16x512x16xf32>
// CHECK-NOT: memref.alloca
// CHECK-NOT: memref.alloc({{.*}}) {{.*}} : memref<?x?x?x16xf32>
// CHECK: return
func.func @expert_choice_experts_plain(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>, %w2: tensor<4x32x16xf32>,
    %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

/// Soft MoE with panels: the logits and dispatch GEMMs (phase 1) and the
/// combine GEMM (phase 3) pack their computed B into a stack scratch per
/// group; the expert GEMMs (phase 2) read the panels.
// CHECK-LABEL: func.func @soft_moe_panels
// CHECK: scf.forall
// CHECK: memref.alloca() {alignment = 64 : i64, vmoe.stack_scratch} : memref<16x512x16xf32>
// CHECK: scf.forall
// CHECK-NOT: memref.alloca
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x4x32x16xf32, {{.*}}>, vector<8xf32>
// CHECK: vector.load %{{.*}}[%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<4x2x64x16xf32, {{.*}}>, vector<8xf32>
// CHECK: scf.forall
// CHECK: memref.alloca() {alignment = 64 : i64, vmoe.stack_scratch} : memref<16x512x16xf32>
// CHECK-NOT: memref.alloca
// CHECK: return
func.func @soft_moe_panels(%x: tensor<2x8x32xf32>, %phi: tensor<32x4x2xf32>, %scale: tensor<f32>,
    %p1: tensor<4x4x32x16xf32>, %b1: tensor<4x64xf32>, %p2: tensor<4x2x64x16xf32>, %b2: tensor<4x32xf32>)
    -> tensor<2x8x32xf32> {
  %o = vmoe.soft_moe %x, %phi, %scale, %p1, %b1, %p2, %b2 {weight_panels = 16 : i64}
      : tensor<2x8x32xf32>, tensor<32x4x2xf32>, tensor<f32>, tensor<4x4x32x16xf32>, tensor<4x64xf32>,
        tensor<4x2x64x16xf32>, tensor<4x32xf32>
  return %o : tensor<2x8x32xf32>
}

// -----

/// Fused experts without panels: one stack scratch per expert, no heap
/// scratch of panels.
// CHECK-LABEL: func.func @fused_experts_plain
// CHECK: scf.forall
// CHECK-COUNT-1: memref.alloca() {alignment = 64 : i64, vmoe.stack_scratch} : memref<16x512x16xf32>
// CHECK-NOT: memref.alloca
// CHECK-NOT: memref.alloc({{.*}}) {{.*}} : memref<?x?x?x16xf32>
// CHECK: return
func.func @fused_experts_plain(%x: tensor<1x16x32xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x8xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x32x64xf32>, %b1: tensor<4x64xf32>,
    %w2: tensor<4x64x32xf32>, %b2: tensor<4x32xf32>) -> tensor<1x16x32xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x16x32xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x8xi32>, tensor<4x1xi32>,
        tensor<4x32x64xf32>, tensor<4x64xf32>, tensor<4x64x32xf32>, tensor<4x32xf32>
  return %o : tensor<1x16x32xf32>
}
