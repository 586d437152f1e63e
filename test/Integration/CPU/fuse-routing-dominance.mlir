// RUN: vmoe-opt %s --vmoe-lower-to-cpu \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN:   | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="fuse=false" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN:   | FileCheck %s

// vmoe-fuse-routing with uses of the route's results before the
// assign_slots (issue 9): the ids read for statistics before dispatch, and
// one route feeding a vanilla and a BPR assign_slots. Fused at the route,
// the default pipeline accepts both and prints what the unfused pipeline
// prints (the same CHECK lines run against both). The layer is the one of
// tiny-layer-runner.mlir: ids [0, 1, 0, 0], BPR order [2, 0, 1, 3], B = 2.

func.func private @printMemrefI32(tensor<*xi32>)

func.func @main() {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %x = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]]> : tensor<1x4x2xf32>
  %router = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>

  %gates, %ids, %w = vmoe.route %x, %router {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  // An early use of the ids, between the route and the assign_slots.
  %second = tensor.extract %ids[%c0, %c1, %c0] : tensor<1x4x1xi32>
  // A vanilla assign_slots of the same route, before the BPR one.
  %vs, %ve, %vf = vmoe.assign_slots %ids
      : tensor<1x4x1xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>
  %s, %e, %f = vmoe.assign_slots %ids, %order
      : tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<1x4x1xi32>, tensor<2x1x2xi32>, tensor<2x1xi32>

  // CHECK: sizes = [1] strides = [1] data =
  // CHECK-NEXT{LITERAL}: [1]
  %early = tensor.from_elements %second : tensor<1xi32>
  %u0 = tensor.cast %early : tensor<1xi32> to tensor<*xi32>
  call @printMemrefI32(%u0) : (tensor<*xi32>) -> ()
  // Vanilla: t0 and t2 fill expert 0, t3 is dropped.
  // CHECK: sizes = [1, 4, 1]
  // CHECK-NEXT{LITERAL}: [[[0],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [1],
  // CHECK-NEXT: [-1]]]
  %u1 = tensor.cast %vs : tensor<1x4x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u1) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [2, 1]
  // CHECK-NEXT{LITERAL}: [[2],
  // CHECK-NEXT: [1]]
  %u2 = tensor.cast %vf : tensor<2x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u2) : (tensor<*xi32>) -> ()
  // BPR: t2 then t0 fill expert 0, t3 is dropped.
  // CHECK: sizes = [1, 4, 1]
  // CHECK-NEXT{LITERAL}: [[[1],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [-1]]]
  %u3 = tensor.cast %s : tensor<1x4x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u3) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [2, 1, 2]
  // CHECK-NEXT{LITERAL}: [[[2, 0]],
  // CHECK-NEXT{LITERAL}: [[1, -1]]]
  %u4 = tensor.cast %e : tensor<2x1x2xi32> to tensor<*xi32>
  call @printMemrefI32(%u4) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [2, 1]
  // CHECK-NEXT{LITERAL}: [[2],
  // CHECK-NEXT: [1]]
  %u5 = tensor.cast %f : tensor<2x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u5) : (tensor<*xi32>) -> ()
  return
}
