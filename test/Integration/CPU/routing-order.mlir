// RUN: vmoe-opt %s --vmoe-lower-to-cpu \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils \
// RUN:   | FileCheck %s

// vmoe.route's top-k order on planted logits, run end to end: x = 0 and a
// router of ones give logits of +0, and noise_std = E scales the noise by
// exactly 1, so the logits are the noise (order topk_softmax: top-k over
// the logits). k = E: every choice, in order of value (descending), ties
// to the lower expert, NaN never chosen, -inf after every number; once no
// entry is left, every later choice is -1 (no expert is chosen twice).
//   token 0: [1, NaN, 3, 3, -inf, NaN, -inf, 5] -> 7, 2, 3, 0, 4, 6, -1, -1
//   token 1: [-0, 0, 2, -0, 2, 0, -1, 0]        -> 2, 4, 0, 1, 3, 5, 7, 6
// (token 1: 0 + -0 is +0, so all four zeros tie.) The weights are the
// softmax over the chosen logits: token 0 over [5, 3, 3, 1] (the -inf and
// missing choices weigh 0), token 1 over [2, 2, 0, 0, 0, 0, 0, -1].
//
// vmoe.bpr_sort on planted gates (one expert: the score is the gate):
// [0.5, NaN, -0, 0.5, +0, -inf] -> 0, 3 (tied, token order), 2, 4 (-0
// and +0 tie), 5, then the NaN token last.

func.func private @printMemrefI32(tensor<*xi32>)
func.func private @printMemrefF32(tensor<*xf32>)

func.func @main() {
  %x = arith.constant dense<0.0> : tensor<1x2x2xf32>
  %router = arith.constant dense<1.0> : tensor<2x8xf32>
  %nan = arith.constant 0x7FC00000 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %row0 = arith.constant dense<[[[1.0, 0.0, 3.0, 3.0, 0.0, 0.0, 0.0, 5.0],
                                 [-0.0, 0.0, 2.0, -0.0, 2.0, 0.0, -1.0, 0.0]]]> : tensor<1x2x8xf32>
  %n1 = tensor.insert %nan into %row0[%c0, %c0, %c1] : tensor<1x2x8xf32>
  %n2 = tensor.insert %nan into %n1[%c0, %c0, %c5] : tensor<1x2x8xf32>
  %n3 = tensor.insert %ninf into %n2[%c0, %c0, %c4] : tensor<1x2x8xf32>
  %noise = tensor.insert %ninf into %n3[%c0, %c0, %c6] : tensor<1x2x8xf32>

  %gates, %ids, %w = vmoe.route %x, %router noise(%noise : tensor<1x2x8xf32>)
      {k = 8 : i64, order = #vmoe.route_order<topk_softmax>, noise_std = 8.0 : f64}
      : tensor<1x2x2xf32>, tensor<2x8xf32> -> tensor<1x2x8xf32>, tensor<1x2x8xi32>, tensor<1x2x8xf32>

  // CHECK: sizes = [1, 2, 8]
  // CHECK-NEXT{LITERAL}: [[[7, 2, 3, 0, 4, 6, -1, -1],
  // CHECK-NEXT{LITERAL}: [2, 4, 0, 1, 3, 5, 7, 6]]]
  %u0 = tensor.cast %ids : tensor<1x2x8xi32> to tensor<*xi32>
  call @printMemrefI32(%u0) : (tensor<*xi32>) -> ()
  // CHECK: sizes = [1, 2, 8]
  // CHECK-NEXT{LITERAL}: [[[0.775803, 0.104994, 0.104994, 0.0142093, 0, 0, 0, 0],
  // CHECK-NEXT{LITERAL}: [0.366776, 0.366776, 0.0496377, 0.0496377, 0.0496377, 0.0496377, 0.0496377, 0.0182607]]]
  %u1 = tensor.cast %w : tensor<1x2x8xf32> to tensor<*xf32>
  call @printMemrefF32(%u1) : (tensor<*xf32>) -> ()

  %scores0 = arith.constant dense<[[[0.5], [0.0], [-0.0], [0.5], [0.0], [0.0]]]> : tensor<1x6x1xf32>
  %s1 = tensor.insert %nan into %scores0[%c0, %c1, %c0] : tensor<1x6x1xf32>
  %scores = tensor.insert %ninf into %s1[%c0, %c5, %c0] : tensor<1x6x1xf32>
  %order = vmoe.bpr_sort %scores : tensor<1x6x1xf32> -> tensor<1x6xi32>
  // CHECK: sizes = [1, 6]
  // CHECK-NEXT{LITERAL}: [[0, 3, 2, 4, 5, 1]]
  %u2 = tensor.cast %order : tensor<1x6xi32> to tensor<*xi32>
  call @printMemrefI32(%u2) : (tensor<*xi32>) -> ()
  return
}
