// RUN: %if avx512bf16 %{ vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s %}
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" | FileCheck %s --check-prefix=IR

// Attention's products with --precision=bf16 executed: contractions whose
// bodies round both operands to bf16 (buildBF16RoundedContractionBody),
// rewritten by vmoe-vectorize-contractions into the pair microkernel with
// B packed into pairs per call (vdpbf16ps, first RUN; shift + fma with 8
// lanes, second RUN), against the same products computed the plain way
// from operands rounded beforehand. The scores shape (50 keys: masked
// columns; K = 64) and the context shape with an odd K (25 keys: the last
// pair's high half 0) and 64 columns. Every operand is an integer 1..6
// plus 2^-9, which bf16 rounds away, so every sum is exact: the two agree
// exactly, and a kernel that skipped the rounding (or misplaced a pair)
// would not.

// IR-LABEL: llvm.func @scores
// IR: llvm.x86.avx512bf16.dpbf16ps.512
// IR-LABEL: llvm.func @context
// IR: llvm.x86.avx512bf16.dpbf16ps.512
// CHECK: scores ok 1
// CHECK: scores rounded 1
// CHECK: context ok 1

#q = affine_map<(n, h, i, j, c) -> (n, i, h, c)>
#kt = affine_map<(n, h, i, j, c) -> (n, h, c, j)>
#s = affine_map<(n, h, i, j, c) -> (n, h, i, j)>
#p = affine_map<(h, i, j, c) -> (h, i, j)>
#v = affine_map<(h, i, j, c) -> (h, j, c)>
#o = affine_map<(h, i, j, c) -> (h, i, c)>
#id4 = affine_map<(a, b, c, d) -> (a, b, c, d)>
#id3 = affine_map<(a, b, c) -> (a, b, c)>
#all4 = affine_map<(a, b, c, d) -> ()>
#all3 = affine_map<(a, b, c) -> ()>

func.func @scores(%q: tensor<2x50x8x64xf32>, %kt: tensor<2x8x64x50xf32>) -> tensor<2x8x50x50xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x50x50xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x8x50x50xf32>) -> tensor<2x8x50x50xf32>
  %r = linalg.generic {indexing_maps = [#q, #kt, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) outs(%f : tensor<2x8x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %m = arith.mulf %xr, %yr : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x8x50x50xf32>
  return %r : tensor<2x8x50x50xf32>
}

func.func @scores_plain(%q: tensor<2x50x8x64xf32>, %kt: tensor<2x8x64x50xf32>) -> tensor<2x8x50x50xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x8x50x50xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<2x8x50x50xf32>) -> tensor<2x8x50x50xf32>
  %r = linalg.generic {indexing_maps = [#q, #kt, #s], iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) outs(%f : tensor<2x8x50x50xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<2x8x50x50xf32>
  return %r : tensor<2x8x50x50xf32>
}

func.func @context(%p: tensor<3x25x25xf32>, %v: tensor<3x25x64xf32>) -> tensor<3x25x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x25x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<3x25x64xf32>) -> tensor<3x25x64xf32>
  %r = linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : tensor<3x25x25xf32>, tensor<3x25x64xf32>) outs(%f : tensor<3x25x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %xt = arith.truncf %x : f32 to bf16
    %xr = arith.extf %xt : bf16 to f32
    %yt = arith.truncf %y : f32 to bf16
    %yr = arith.extf %yt : bf16 to f32
    %m = arith.mulf %xr, %yr : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<3x25x64xf32>
  return %r : tensor<3x25x64xf32>
}

func.func @context_plain(%p: tensor<3x25x25xf32>, %v: tensor<3x25x64xf32>) -> tensor<3x25x64xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<3x25x64xf32>
  %f = linalg.fill ins(%z : f32) outs(%e : tensor<3x25x64xf32>) -> tensor<3x25x64xf32>
  %r = linalg.generic {indexing_maps = [#p, #v, #o], iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : tensor<3x25x25xf32>, tensor<3x25x64xf32>) outs(%f : tensor<3x25x64xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %m = arith.mulf %x, %y : f32
    %a = arith.addf %acc, %m : f32
    linalg.yield %a : f32
  } -> tensor<3x25x64xf32>
  return %r : tensor<3x25x64xf32>
}

func.func @diff4(%a: tensor<2x8x50x50xf32>, %b: tensor<2x8x50x50xf32>) -> i64 {
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id4, #id4, #all4], iterator_types = ["reduction", "reduction", "reduction", "reduction"]}
      ins(%a, %b : tensor<2x8x50x50xf32>, tensor<2x8x50x50xf32>) outs(%init : tensor<f32>) {
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
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %off = arith.constant 0.001953125 : f32
  %zero = arith.constant 0.0 : f32

  // Operands: 1 + ((a + 3b + 5c + 7d) mod 6) over their indices, plus
  // 2^-9 (which bf16 rounds away) for the rounded products.
  %c5 = arith.constant 5 : index
  %c6 = arith.constant 6 : index
  %c7 = arith.constant 7 : index
  %q_e = tensor.empty() : tensor<2x50x8x64xf32>
  %q = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%q_e : tensor<2x50x8x64xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %off : f32
    linalg.yield %w : f32
  } -> tensor<2x50x8x64xf32>
  %k_e = tensor.empty() : tensor<2x8x64x50xf32>
  %k = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%k_e : tensor<2x8x64x50xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %off : f32
    linalg.yield %w : f32
  } -> tensor<2x8x64x50xf32>
  %qint_e = tensor.empty() : tensor<2x50x8x64xf32>
  %qint = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%qint_e : tensor<2x50x8x64xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %zero : f32
    linalg.yield %w : f32
  } -> tensor<2x50x8x64xf32>
  %kint_e = tensor.empty() : tensor<2x8x64x50xf32>
  %kint = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%kint_e : tensor<2x8x64x50xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %zero : f32
    linalg.yield %w : f32
  } -> tensor<2x8x64x50xf32>
  %s = call @scores(%q, %k) : (tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) -> tensor<2x8x50x50xf32>
  %sp = call @scores_plain(%qint, %kint) : (tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) -> tensor<2x8x50x50xf32>
  %ok1 = call @diff4(%s, %sp) : (tensor<2x8x50x50xf32>, tensor<2x8x50x50xf32>) -> i64
  vector.print str "scores ok "
  vector.print %ok1 : i64
  // The same offset operands without rounding differ (the check can fail).
  %su = call @scores_plain(%q, %k) : (tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) -> tensor<2x8x50x50xf32>
  %same = call @diff4(%su, %sp) : (tensor<2x8x50x50xf32>, tensor<2x8x50x50xf32>) -> i64
  %one = arith.constant 1 : i64
  %differs = arith.subi %one, %same : i64
  vector.print str "scores rounded "
  vector.print %differs : i64

  // Context: [3, 25, 25] x [3, 25, 64] (as 4-d values with a unit dim).
  %p4_e = tensor.empty() : tensor<1x3x25x25xf32>
  %p4 = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%p4_e : tensor<1x3x25x25xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %off : f32
    linalg.yield %w : f32
  } -> tensor<1x3x25x25xf32>
  %v4_e = tensor.empty() : tensor<1x3x25x64xf32>
  %v4 = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%v4_e : tensor<1x3x25x64xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %off : f32
    linalg.yield %w : f32
  } -> tensor<1x3x25x64xf32>
  %pi4_e = tensor.empty() : tensor<1x3x25x25xf32>
  %pi4 = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%pi4_e : tensor<1x3x25x25xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %zero : f32
    linalg.yield %w : f32
  } -> tensor<1x3x25x25xf32>
  %vi4_e = tensor.empty() : tensor<1x3x25x64xf32>
  %vi4 = linalg.generic {indexing_maps = [#id4], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      outs(%vi4_e : tensor<1x3x25x64xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %d = linalg.index 3 : index
    %b3 = arith.muli %b, %c3 : index
    %c5v = arith.muli %c, %c5 : index
    %d7 = arith.muli %d, %c7 : index
    %s1 = arith.addi %a, %b3 : index
    %s2 = arith.addi %s1, %c5v : index
    %s3 = arith.addi %s2, %d7 : index
    %m = arith.remui %s3, %c6 : index
    %m1 = arith.addi %m, %c1 : index
    %i = arith.index_cast %m1 : index to i32
    %fv = arith.sitofp %i : i32 to f32
    %w = arith.addf %fv, %zero : f32
    linalg.yield %w : f32
  } -> tensor<1x3x25x64xf32>
  %p = tensor.collapse_shape %p4 [[0, 1], [2], [3]] : tensor<1x3x25x25xf32> into tensor<3x25x25xf32>
  %v = tensor.collapse_shape %v4 [[0, 1], [2], [3]] : tensor<1x3x25x64xf32> into tensor<3x25x64xf32>
  %pint = tensor.collapse_shape %pi4 [[0, 1], [2], [3]] : tensor<1x3x25x25xf32> into tensor<3x25x25xf32>
  %vint = tensor.collapse_shape %vi4 [[0, 1], [2], [3]] : tensor<1x3x25x64xf32> into tensor<3x25x64xf32>
  %o = call @context(%p, %v) : (tensor<3x25x25xf32>, tensor<3x25x64xf32>) -> tensor<3x25x64xf32>
  %op = call @context_plain(%pint, %vint) : (tensor<3x25x25xf32>, tensor<3x25x64xf32>) -> tensor<3x25x64xf32>
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%zero : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id3, #id3, #all3], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%o, %op : tensor<3x25x64xf32>, tensor<3x25x64xf32>) outs(%init : tensor<f32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %d = arith.subf %x, %y : f32
    %ad = math.absf %d : f32
    %sum = arith.addf %acc, %ad : f32
    linalg.yield %sum : f32
  } -> tensor<f32>
  %ev = tensor.extract %err[] : tensor<f32>
  %ok3 = arith.cmpf oeq, %ev, %zero : f32
  %oki3 = arith.extui %ok3 : i1 to i64
  vector.print str "context ok "
  vector.print %oki3 : i64
  return
}
