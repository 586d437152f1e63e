// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of vmoe.router_losses and vmoe.expert_swiglu in their custom and
// generic forms.

// CHECK-LABEL: func.func @router_losses_noisy
// CHECK: vmoe.router_losses %{{.*}}, %{{.*}} noise(%{{.*}} : tensor<2x400x32xf32>) {k = 2 : i64, noise_std = 1.000000e+00 : f64}
// CHECK-SAME: : tensor<2x400x512xf32>, tensor<512x32xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
func.func @router_losses_noisy(%x: tensor<2x400x512xf32>, %router: tensor<512x32xf32>,
    %noise: tensor<2x400x32xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %imp, %load, %gshard = vmoe.router_losses %x, %router
      noise(%noise : tensor<2x400x32xf32>) {k = 2 : i64, noise_std = 1.0}
      : tensor<2x400x512xf32>, tensor<512x32xf32>
      -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  return %imp, %load, %gshard : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// Inference graphs: no noise operand, no noise_std.
// CHECK-LABEL: func.func @router_losses_inference_dynamic_groups
// CHECK: vmoe.router_losses %{{.*}}, %{{.*}} {k = 1 : i64} : tensor<?x5x10xbf16>, tensor<10x8xbf16> -> tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
// CHECK-NOT: noise
func.func @router_losses_inference_dynamic_groups(%x: tensor<?x5x10xbf16>, %router: tensor<10x8xbf16>)
    -> tensor<?xf32> {
  %imp, %load, %gshard = vmoe.router_losses %x, %router {k = 1 : i64}
      : tensor<?x5x10xbf16>, tensor<10x8xbf16> -> tensor<?xf32>, tensor<?xf32>, tensor<?xf32>
  return %gshard : tensor<?xf32>
}

// -----

// CHECK-LABEL: func.func @expert_swiglu
// CHECK: vmoe.expert_swiglu %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} : tensor<8x1x64x256xf32>, tensor<8x256x512xf32>, tensor<8x256x512xf32>, tensor<8x512x256xf32>
func.func @expert_swiglu(%buf: tensor<8x1x64x256xf32>, %wg: tensor<8x256x512xf32>,
    %wu: tensor<8x256x512xf32>, %wd: tensor<8x512x256xf32>) -> tensor<8x1x64x256xf32> {
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<8x1x64x256xf32>, tensor<8x256x512xf32>, tensor<8x256x512xf32>, tensor<8x512x256xf32>
  return %y : tensor<8x1x64x256xf32>
}

// -----

// Dynamic B (the dispatch buffers of a runtime capacity).
// CHECK-LABEL: func.func @expert_swiglu_dynamic_capacity
// CHECK: vmoe.expert_swiglu %{{.*}} : tensor<4x2x?x10xf32>
func.func @expert_swiglu_dynamic_capacity(%buf: tensor<4x2x?x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) -> tensor<4x2x?x10xf32> {
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<4x2x?x10xf32>, tensor<4x10x12xf32>, tensor<4x10x12xf32>, tensor<4x12x10xf32>
  return %y : tensor<4x2x?x10xf32>
}

// -----

// The gated (SwiGLU) form of vmoe.fused_experts that vmoe-fuse-experts makes.
// CHECK-LABEL: func.func @fused_experts_gated
// CHECK: vmoe.fused_experts %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}} gated(%{{.*}} : tensor<4x8x12xf32>) {activation = #vmoe.activation<silu>}
func.func @fused_experts_gated(%x: tensor<1x16x8xf32>, %s: tensor<1x16x2xi32>, %w: tensor<1x16x2xf32>,
    %e: tensor<4x1x16xi32>, %f: tensor<4x1xi32>, %wg: tensor<4x8x12xf32>, %b1: tensor<4x12xf32>,
    %wd: tensor<4x12x8xf32>, %b2: tensor<4x8xf32>, %wu: tensor<4x8x12xf32>) -> tensor<1x16x8xf32> {
  %o = vmoe.fused_experts %x, %s, %w, %e, %f, %wg, %b1, %wd, %b2 gated(%wu : tensor<4x8x12xf32>)
      {activation = #vmoe.activation<silu>}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>, tensor<4x1x16xi32>, tensor<4x1xi32>,
        tensor<4x8x12xf32>, tensor<4x12xf32>, tensor<4x12x8xf32>, tensor<4x8xf32>
  return %o : tensor<1x16x8xf32>
}
