// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s
// RUN: vmoe-opt %vmoe_src_root/examples/decoder_moe_layer.mlir --vmoe-lower-to-cpu \
// RUN:   | FileCheck %s --check-prefix=EXAMPLE

// vmoe.router_losses in a training graph: the router contraction, the noise
// of vmoe.route (noise_std / E = 1/4), the softmax, and the load loss's
// normal tail through erfc (f32).
// CHECK-LABEL: func.func @router_losses_noisy
// CHECK-NOT: vmoe.router_losses
// CHECK: %[[SCALE:.*]] = arith.constant 2.500000e-01 : f32
// CHECK: linalg.generic
// CHECK: arith.mulf %{{.*}}, %[[SCALE]] : f32
// CHECK: math.exp
// CHECK: scf.forall
// CHECK: math.erfc %{{.*}} : f32
// CHECK: return
func.func @router_losses_noisy(%x: tensor<2x5x12xf32>, %router: tensor<12x4xf32>,
    %noise: tensor<2x5x4xf32>) -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %i, %l, %g = vmoe.router_losses %x, %router noise(%noise : tensor<2x5x4xf32>)
      {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<2x5x12xf32>, tensor<12x4xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  return %i, %l, %g : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

/// An inference graph carries no noise: no noise term, no top-k threshold
/// and no erfc; the load loss is a zero fill.
// CHECK-LABEL: func.func @router_losses_inference
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant 0.000000e+00 : f32
// CHECK-NEXT: %[[EMPTY:.*]] = tensor.empty() : tensor<2xf32>
// CHECK-NEXT: %[[LOAD:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[EMPTY]] : tensor<2xf32>)
// CHECK-NOT: scf.forall
// CHECK-NOT: math.erfc
// CHECK: return %{{.*}}, %[[LOAD]], %{{.*}}
func.func @router_losses_inference(%x: tensor<2x5x12xf32>, %router: tensor<12x4xf32>)
    -> (tensor<2xf32>, tensor<2xf32>, tensor<2xf32>) {
  %i, %l, %g = vmoe.router_losses %x, %router {k = 2 : i64}
      : tensor<2x5x12xf32>, tensor<12x4xf32> -> tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
  return %i, %l, %g : tensor<2xf32>, tensor<2xf32>, tensor<2xf32>
}

// -----

// vmoe.expert_swiglu: the gate and up contractions, silu(gate) * up in
// place of up, the down contraction.
// CHECK-LABEL: func.func @expert_swiglu
// CHECK-NOT: vmoe.
// CHECK: %[[GATE:.*]] = linalg.generic {{.*}}"reduction", "parallel"]} ins(%{{.*}}, %arg1 :
// CHECK: %[[UP:.*]] = linalg.generic {{.*}}"reduction", "parallel"]} ins(%{{.*}}, %arg2 :
// CHECK: %[[H:.*]] = linalg.generic {{.*}} ins(%[[GATE]] : tensor<4x2x6x12xf32>) outs(%[[UP]] : tensor<4x2x6x12xf32>)
// CHECK:   math.exp
// CHECK:   arith.divf
// CHECK:   arith.mulf
// CHECK: linalg.generic {{.*}}"reduction", "parallel"]} ins(%[[H]], %arg3 :
func.func @expert_swiglu(%buf: tensor<4x2x6x10xf32>, %wg: tensor<4x10x12xf32>,
    %wu: tensor<4x10x12xf32>, %wd: tensor<4x12x10xf32>) -> tensor<4x2x6x10xf32> {
  %y = vmoe.expert_swiglu %buf, %wg, %wu, %wd
      : tensor<4x2x6x10xf32>, tensor<4x10x12xf32>, tensor<4x10x12xf32>, tensor<4x12x10xf32>
  return %y : tensor<4x2x6x10xf32>
}

// The example's three layers go through the whole CPU pipeline.
// EXAMPLE-DAG: llvm.func @mixtral_dropless
// EXAMPLE-DAG: llvm.func @mixtral_training_losses
// EXAMPLE-DAG: llvm.func @switch_c125
// EXAMPLE-NOT: vmoe.
