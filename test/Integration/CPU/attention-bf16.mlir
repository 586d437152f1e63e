// RUN: %if avx512bf16 %{ vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s %}
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 parallel=false" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// vmoe.attention with bf16_products (the fused kernel of
// lib/Conversion/VMoEToSCF/AttentionLowering.cpp: k's pairs, qᵀ's pair
// panels by register transposes, the transposed scores, the softmax down
// the keys, the probabilities' pairs, v's panels) against the f32 form
// (the linalg.generic contractions) on the same values rounded to bf16
// beforehand: q, k, v are multiples of 1/16 in [-3/16, 7/16], exact in
// bf16, plus 2^-14, which bf16 rounds away. Only the softmax's f32 bits
// (exp polynomial, summation order, the reciprocal) and the rounding of
// the probabilities to bf16 (2^-9 relative) separate the two: the context
// values (|v| <= 7/16) agree within 1e-2 (measured 4.3e-4), where the
// queries' words placed one lane off move them by 0.05. 50 keys (16-lane
// panels, the last masked), dh = 40 (20 words: a full 16 x 16 tile and a
// partial one; k past 40 read as 0), 3 heads, 2 images; all queries, then
// the class tokens' only (Tq = 1).

// CHECK: attention max error small 1
// CHECK: attention differs from unrounded 1
// CHECK: class queries max error small 1

#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#all4 = affine_map<(a, b, c, d) -> ()>

// ((2 ((a + s1 b + s2 c + 7 d) mod 6) - 3) / 16) + off over the indices.
func.func @operand(%s1: index, %s2: index, %off: f32) -> tensor<2x50x3x40xf32> {
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %sixteenth = arith.constant 0.0625 : f32
  %two = arith.constant 2.0 : f32
  %three = arith.constant 3.0 : f32
  %e = tensor.empty() : tensor<2x50x3x40xf32>
  %r = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%e : tensor<2x50x3x40xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %bs = arith.muli %b, %s1 : index
    %cs = arith.muli %c, %s2 : index
    %d7 = arith.muli %d, %c7 : index
    %t1 = arith.addi %a, %bs : index
    %t2 = arith.addi %t1, %cs : index
    %t3 = arith.addi %t2, %d7 : index
    %m = arith.remui %t3, %c6 : index
    %i = arith.index_cast %m : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %f2 = arith.mulf %fv, %two : f32
    %f3 = arith.subf %f2, %three : f32
    %f4 = arith.mulf %f3, %sixteenth : f32
    %w = arith.addf %f4, %off : f32
    linalg.yield %w : f32
  } -> tensor<2x50x3x40xf32>
  return %r : tensor<2x50x3x40xf32>
}

// The largest |a - b|.
func.func @max_error(%a: tensor<?x?x3x40xf32>, %b: tensor<?x?x3x40xf32>) -> f32 {
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id4, #id4, #all4], iterator_types = ["reduction", "reduction", "reduction", "reduction"]}
      ins(%a, %b : tensor<?x?x3x40xf32>, tensor<?x?x3x40xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %d = arith.subf %x, %y : f32
    %ad = math.absf %d : f32
    %s = arith.maximumf %acc, %ad : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %ev = tensor.extract %err[] : tensor<f32>
  return %ev : f32
}

func.func @main() {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c2 = arith.constant 2 : index
  %c11 = arith.constant 11 : index
  %c4 = arith.constant 4 : index
  %c13 = arith.constant 13 : index
  %off = arith.constant 6.103515625e-05 : f32
  %zero = arith.constant 0.0 : f32
  %q = call @operand(%c3, %c5, %off) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %k = call @operand(%c2, %c11, %off) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %v = call @operand(%c4, %c13, %off) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %qi = call @operand(%c3, %c5, %zero) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %ki = call @operand(%c2, %c11, %zero) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %vi = call @operand(%c4, %c13, %zero) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %got = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  %want = vmoe.attention %qi, %ki, %vi
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  %unrounded = vmoe.attention %q, %k, %v
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  %gotd = tensor.cast %got : tensor<2x50x3x40xf32> to tensor<?x?x3x40xf32>
  %wantd = tensor.cast %want : tensor<2x50x3x40xf32> to tensor<?x?x3x40xf32>
  %unroundedd = tensor.cast %unrounded : tensor<2x50x3x40xf32> to tensor<?x?x3x40xf32>
  %err = call @max_error(%gotd, %wantd) : (tensor<?x?x3x40xf32>, tensor<?x?x3x40xf32>) -> f32
  %moved = call @max_error(%wantd, %unroundedd) : (tensor<?x?x3x40xf32>, tensor<?x?x3x40xf32>) -> f32
  %bound = arith.constant 1.0e-2 : f32
  %tiny = arith.constant 1.0e-7 : f32
  vector.print str "attention max error small "
  %small = arith.cmpf olt, %err, %bound : f32
  %smalli = arith.extui %small : i1 to i64
  vector.print %smalli : i64
  // The rounding is real: the unrounded operands give other values.
  vector.print str "attention differs from unrounded "
  %differs = arith.cmpf ogt, %moved, %tiny : f32
  %differsi = arith.extui %differs : i1 to i64
  vector.print %differsi : i64

  // Class queries: query 0 of each image against all 50 keys.
  %q1 = tensor.extract_slice %q[0, 0, 0, 0] [2, 1, 3, 40] [1, 1, 1, 1] : tensor<2x50x3x40xf32> to tensor<2x1x3x40xf32>
  %q1i = tensor.extract_slice %qi[0, 0, 0, 0] [2, 1, 3, 40] [1, 1, 1, 1] : tensor<2x50x3x40xf32> to tensor<2x1x3x40xf32>
  %got1 = vmoe.attention %q1, %k, %v {bf16_products}
      : tensor<2x1x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  %want1 = vmoe.attention %q1i, %ki, %vi
      : tensor<2x1x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  %got1d = tensor.cast %got1 : tensor<2x1x3x40xf32> to tensor<?x?x3x40xf32>
  %want1d = tensor.cast %want1 : tensor<2x1x3x40xf32> to tensor<?x?x3x40xf32>
  %err1 = call @max_error(%got1d, %want1d) : (tensor<?x?x3x40xf32>, tensor<?x?x3x40xf32>) -> f32
  vector.print str "class queries max error small "
  %small1 = arith.cmpf olt, %err1, %bound : f32
  %small1i = arith.extui %small1 : i1 to i64
  vector.print %small1i : i64
  vector.print str "errors "
  vector.print %err : f32
  vector.print %err1 : f32
  return
}
