// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-gpu | FileCheck %s

// fused_experts: two GEMM launches over (column tiles, row tiles, E * G),
// 16 x 16 threads with shared-memory tiles for A and B, fma accumulation
// between barriers; then the choice-ordered sum of the planes. The hidden
// buffer has the static dims of the operands.
// CHECK-LABEL: func.func @fused_experts
// CHECK: %[[HIDDEN:.*]] = memref.alloc() : memref<4x1x3x32xf32>
// CHECK: %[[PLANES:.*]] = memref.alloc() : memref<2x1x8x16xf32>
// CHECK: gpu.launch blocks(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) threads(%{{.*}}, %{{.*}}, %{{.*}}) in (%{{.*}} = %c16{{.*}}, %{{.*}} = %c16{{.*}}, %{{.*}} = %c1{{.*}}) workgroup(%{{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>)
// CHECK:   scf.if
// CHECK:     scf.for
// CHECK:       gpu.barrier
// CHECK:       scf.for
// CHECK:         math.fma
// CHECK:       gpu.barrier
// CHECK:     memref.store %{{.*}}, %[[HIDDEN]]
// CHECK:   gpu.terminator
// CHECK: gpu.launch
// CHECK:     memref.store %{{.*}}, %[[PLANES]]
// CHECK: bufferization.to_tensor %[[PLANES]] restrict writable
// CHECK: linalg.generic
// CHECK-NOT: vmoe.fused_experts
func.func @fused_experts(%x: tensor<1x8x16xf32>, %s: tensor<1x8x2xi32>, %w: tensor<1x8x2xf32>,
    %e: tensor<4x1x3xi32>, %f: tensor<4x1xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>,
    %w2: tensor<4x32x16xf32>, %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>, tensor<4x1x3xi32>, tensor<4x1xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}

// -----

/// The other vmoe ops are left for convert-vmoe-to-scf.
// CHECK-LABEL: func.func @negative_route
// CHECK: vmoe.route
// CHECK-NOT: gpu.launch
func.func @negative_route(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>) -> tensor<1x8x2xi32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  return %ids : tensor<1x8x2xi32>
}

// -----

// attention (hand-written; the front end emits it for the CPU only): the
// linalg contractions and softmax of the GPU target's front end, k copied
// to kᵀ first, the products' operands rounded to bf16; no CPU loop.
// CHECK-LABEL: func.func @attention_bf16
// CHECK-NOT: scf.forall
// CHECK-NOT: vmoe.attention
// CHECK: linalg.generic
// CHECK: outs(%{{.*}} : tensor<2x3x40x50xf32>)
// CHECK: arith.truncf %{{.*}} : f32 to bf16
// CHECK-NOT: vector.scatter
// CHECK: return
func.func @attention_bf16(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>, %v: tensor<2x50x3x40xf32>) -> tensor<2x50x3x40xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  return %c : tensor<2x50x3x40xf32>
}
