// RUN: vmoe-opt %s --vmoe-lower-to-cpu | mlir-translate --mlir-to-llvmir -o %t.ll
// RUN: %clang -O2 -Wno-override-module %S/Inputs/tiny_layer_harness.c %t.ll -lm -o %t.exe
// RUN: %t.exe | FileCheck %s

// The same hand-routed layer as tiny-layer-runner.mlir, compiled to native
// code and called from C through the `_mlir_ciface_` wrapper, with the
// capacity ratio C as a runtime value (compiled maximum B = 2).
//
// C = 1.0: B = round(1*4*1.0/2) = 2. BPR fills e0 with t2, t0 (t3 dropped),
// e1 with t1. C = 0.5: B = 1, as in the runner test: t0 and t3 dropped.

// CHECK: C=1.0 ids: 0 1 0 0
// CHECK-NEXT: C=1.0 slots: 1 0 0 -1
// CHECK-NEXT: C=1.0 out: 0.731059 0.000000 | 0.000000 0.731059 | 1.761594 0.000000 | 0.000000 0.000000
// CHECK-NEXT: C=0.5 ids: 0 1 0 0
// CHECK-NEXT: C=0.5 slots: -1 0 0 -1
// CHECK-NEXT: C=0.5 out: 0.000000 0.000000 | 0.000000 0.731059 | 1.761594 0.000000 | 0.000000 0.000000

func.func @tiny_layer(%x: tensor<1x4x2xf32>, %c: f64, %ids_out: memref<1x4x1xi32>,
                      %slots_out: memref<1x4x1xi32>, %out_out: memref<1x4x2xf32>)
    attributes {llvm.emit_c_interface} {
  %router = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %w1 = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]> : tensor<2x2x2xf32>
  %b = arith.constant dense<0.0> : tensor<2x2xf32>
  %gates, %ids, %w = vmoe.route %x, %router {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  %cap = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 4 : i64,
                           max_capacity = 2 : i64} : f64
  %buf, %slots = vmoe.dispatch %x, %ids, %order capacity(%cap) {capacity_ratio = 1.0 : f64}
      : tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<2x1x?x2xf32>, tensor<1x4x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b, %w1, %b {activation = #vmoe.activation<relu>}
      : tensor<2x1x?x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<2x1x?x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xi32>, tensor<1x4x1xf32> -> tensor<1x4x2xf32>
  bufferization.materialize_in_destination %ids in restrict writable %ids_out
      : (tensor<1x4x1xi32>, memref<1x4x1xi32>) -> ()
  bufferization.materialize_in_destination %slots in restrict writable %slots_out
      : (tensor<1x4x1xi32>, memref<1x4x1xi32>) -> ()
  bufferization.materialize_in_destination %out in restrict writable %out_out
      : (tensor<1x4x2xf32>, memref<1x4x2xf32>) -> ()
  return
}
