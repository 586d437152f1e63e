// RUN: %if avx512bf16 %{ vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s %}
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=12" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" | FileCheck %s --check-prefix=IR

// q kᵀ with --precision=bf16 reading k itself (B contiguous along k, no
// kᵀ copy: lib/Frontend/Attention.cpp): vmoe-vectorize-contractions
// rounds each key's 2 L values of c to L pair words and transposes L keys'
// words (an L x L tile) into the pair panel. Executed with vdpbf16ps (16
// lanes), shift + fma on 16, 8 and 12 lanes (12: not a power of 2, the
// transpose element by element instead of in rounds of shuffles), against
// the same product computed the plain way from operands rounded
// beforehand. 50 keys (the
// last panel's columns masked), c = 40 (20 words: a full tile of 16 and a
// partial one; k past 40 read as 0). Every operand is an integer 1..6 plus
// 2^-9, which bf16 rounds away, so every sum is exact: the two agree
// exactly, and a packing that misplaced a word would not.

// IR-LABEL: llvm.func @scores_k
// IR-NOT: llvm.call @scores
// IR: llvm.x86.avx512bf16.dpbf16ps.512
// CHECK: transposed ok 1
// CHECK: transposed rounded 1

#q = affine_map<(n, h, i, j, c) -> (n, i, h, c)>
#k = affine_map<(n, h, i, j, c) -> (n, j, h, c)>
#s = affine_map<(n, h, i, j, c) -> (n, h, i, j)>
#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#all4 = affine_map<(a, b, c, d) -> ()>

func.func @scores_k(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>) -> tensor<2x3x50x50xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x50x50xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3x50x50xf32>) -> tensor<2x3x50x50xf32>
  %r = linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>) outs(%f : tensor<2x3x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %m = arith.mulf %xr, %yr : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x3x50x50xf32>
  return %r : tensor<2x3x50x50xf32>
}

func.func @scores_plain(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>) -> tensor<2x3x50x50xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x3x50x50xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x3x50x50xf32>) -> tensor<2x3x50x50xf32>
  %r = linalg.generic {indexing_maps = [#q, #k, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>) outs(%f : tensor<2x3x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x3x50x50xf32>
  return %r : tensor<2x3x50x50xf32>
}

// 1 + ((a + s1 b + s2 c + 7 d) mod 6) + off over the indices.
func.func @operand(%s1: index, %s2: index, %off: f32) -> tensor<2x50x3x40xf32> {
  %c1 = arith.constant 1 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
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
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %off : f32
    linalg.yield %w : f32
  } -> tensor<2x50x3x40xf32>
  return %r : tensor<2x50x3x40xf32>
}

// 1 when a and b are equal everywhere (sum of |a - b| is 0).
func.func @same(%a: tensor<2x3x50x50xf32>, %b: tensor<2x3x50x50xf32>) -> i64 {
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id4, #id4, #all4], iterator_types = ["reduction", "reduction", "reduction", "reduction"]}
      ins(%a, %b : tensor<2x3x50x50xf32>, tensor<2x3x50x50xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %d = arith.subf %x, %y : f32
    %ad = math.absf %d : f32
    %s = arith.addf %acc, %ad : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %ev = tensor.extract %err[] : tensor<f32>
  %ok = arith.cmpf oeq, %ev, %z : f32
  %oki = arith.extui %ok : i1 to i64
  return %oki : i64
}

func.func @main() {
  %c3 = arith.constant 3 : index
  %c5 = arith.constant 5 : index
  %c2 = arith.constant 2 : index
  %c11 = arith.constant 11 : index
  %off = arith.constant 0.001953125 : f32
  %zero = arith.constant 0.0 : f32
  %q = call @operand(%c3, %c5, %off) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %k = call @operand(%c2, %c11, %off) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %qi = call @operand(%c3, %c5, %zero) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %ki = call @operand(%c2, %c11, %zero) : (index, index, f32) -> tensor<2x50x3x40xf32>
  %r = call @scores_k(%q, %k) : (tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>) -> tensor<2x3x50x50xf32>
  %want = call @scores_plain(%qi, %ki) : (tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>) -> tensor<2x3x50x50xf32>
  %unrounded = call @scores_plain(%q, %k) : (tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>) -> tensor<2x3x50x50xf32>
  %ok = call @same(%r, %want) : (tensor<2x3x50x50xf32>, tensor<2x3x50x50xf32>) -> i64
  %differs = call @same(%r, %unrounded) : (tensor<2x3x50x50xf32>, tensor<2x3x50x50xf32>) -> i64
  %one = arith.constant 1 : i64
  %rounded = arith.subi %one, %differs : i64
  vector.print str "transposed ok "
  vector.print %ok : i64
  vector.print str "transposed rounded "
  vector.print %rounded : i64
  return
}
