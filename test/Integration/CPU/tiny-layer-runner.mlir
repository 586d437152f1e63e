// RUN: vmoe-opt %s --vmoe-lower-to-cpu \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN:   | FileCheck %s

// A layer small enough to route by hand, run under mlir-runner. Four tokens,
// D = 2, E = 2 experts with an identity router (logits = x), k = 1, B = 1,
// identity experts with relu (y = x).
//   t0 = [1, 0]: gates [0.731, 0.269] -> expert 0
//   t1 = [0, 1]: gates [0.269, 0.731] -> expert 1 (max gate equal to t0's)
//   t2 = [2, 0]: gates [0.881, 0.119] -> expert 0
//   t3 = [0, 0]: gates [0.5, 0.5], a tie -> the lower index, expert 0
// BPR by max gate: t2 (0.881), then t0 and t1 (equal, token order), then t3.
// Vanilla fills in token order: t0 -> e0 slot 0, t1 -> e1 slot 0, t2 and t3
// find e0 full. BPR: t2 -> e0 slot 0, t0 dropped, t1 -> e1 slot 0, t3 dropped.

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %x = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0], [2.0, 0.0], [0.0, 0.0]]]> : tensor<1x4x2xf32>
  %router = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %w1 = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]> : tensor<2x2x2xf32>
  %b = arith.constant dense<0.0> : tensor<2x2xf32>

  %gates, %ids, %w = vmoe.route %x, %router {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  %vbuf, %vslots = vmoe.dispatch %x, %ids {capacity = 1 : i64}
      : tensor<1x4x2xf32>, tensor<1x4x1xi32> -> tensor<2x1x1x2xf32>, tensor<1x4x1xi32>
  %bbuf, %bslots = vmoe.dispatch %x, %ids, %order {capacity = 1 : i64}
      : tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<2x1x1x2xf32>, tensor<1x4x1xi32>
  %y = vmoe.expert_ffn %bbuf, %w1, %b, %w1, %b {activation = #vmoe.activation<relu>}
      : tensor<2x1x1x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>
  %out = vmoe.combine %y, %ids, %bslots, %w
      : tensor<2x1x1x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xi32>, tensor<1x4x1xf32> -> tensor<1x4x2xf32>

  // CHECK: sizes = [1, 4, 1]
  // CHECK-NEXT{LITERAL}: [[[0],
  // CHECK-NEXT: [1],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [0]]]
  %u0 = tensor.cast %ids : tensor<1x4x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u0) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [1, 4]
  // CHECK-NEXT{LITERAL}: [[2, 0, 1, 3]]
  %u1 = tensor.cast %order : tensor<1x4xi32> to tensor<*xi32>
  call @printMemrefI32(%u1) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [1, 4, 1]
  // CHECK-NEXT{LITERAL}: [[[0],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [-1],
  // CHECK-NEXT: [-1]]]
  %u2 = tensor.cast %vslots : tensor<1x4x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u2) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [1, 4, 1]
  // CHECK-NEXT{LITERAL}: [[[-1],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [0],
  // CHECK-NEXT: [-1]]]
  %u3 = tensor.cast %bslots : tensor<1x4x1xi32> to tensor<*xi32>
  call @printMemrefI32(%u3) : (tensor<*xi32>) -> ()
  // Expert 0 holds t2 = [2, 0], expert 1 holds t1 = [0, 1].
  // CHECK: sizes = [2, 1, 1, 2]
  // CHECK-NEXT{LITERAL}: [[[[2, 0]]],
  // CHECK-NEXT{LITERAL}: [[[0, 1]]]]
  %u4 = tensor.cast %bbuf : tensor<2x1x1x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u4) : (tensor<*xf32>) -> ()
  // out = gate * x for kept tokens: t1 -> 0.731 * [0, 1], t2 -> 0.881 * [2, 0].
  // CHECK: sizes = [1, 4, 2]
  // CHECK-NEXT{LITERAL}: [[[0, 0],
  // CHECK-NEXT: [0, 0.731059],
  // CHECK-NEXT: [1.76159, 0],
  // CHECK-NEXT: [0, 0]]]
  %u5 = tensor.cast %out : tensor<1x4x2xf32> to tensor<*xf32>
  call @printMemrefF32(%u5) : (tensor<*xf32>) -> ()
  return
}
