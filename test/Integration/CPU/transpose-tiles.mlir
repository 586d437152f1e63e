// RUN: %if avx512f %{ vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s %}
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16" | FileCheck %s --check-prefix=IR

// Transposing copies executed: y[i, k, j] = x[i, j, k] over a [5, 37, 21]
// input (neither transposed dim a multiple of 16: clamped rows, masked
// lanes and skipped stores at both edges) and attention's kᵀ shape
// [2, 50, 8, 64] -> [2, 8, 64, 50] read from a strided view (the k third of
// a qkv buffer). With 16 lanes vmoe-vectorize-transposes rewrites both into
// 16 x 16 shuffle tiles (first RUN, on AVX-512 hosts); with 8 they stay
// element loops (second RUN). Every value is distinct and exact, so any
// misplaced element makes the checked sum of |y - x| nonzero.

// IR-LABEL: llvm.func @transpose3d
// IR: llvm.shufflevector
// IR-LABEL: llvm.func @attention_kt
// IR: llvm.shufflevector
// CHECK: 3d ok 1
// CHECK: kt ok 1

#id3 = affine_map<(i, j, k) -> (i, j, k)>
#swap = affine_map<(i, j, k) -> (i, k, j)>
#all3 = affine_map<(i, j, k) -> ()>
#id4 = affine_map<(n, j, h, c) -> (n, j, h, c)>
#kt = affine_map<(n, j, h, c) -> (n, h, c, j)>
#all4 = affine_map<(n, j, h, c) -> ()>

func.func @transpose3d(%x: tensor<5x37x21xf32>) -> tensor<5x21x37xf32> {
  %e = tensor.empty() : tensor<5x21x37xf32>
  %y = linalg.generic {indexing_maps = [#id3, #swap], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%x : tensor<5x37x21xf32>) outs(%e : tensor<5x21x37xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<5x21x37xf32>
  return %y : tensor<5x21x37xf32>
}

func.func @attention_kt(%qkv: tensor<2x50x3x8x64xf32>) -> tensor<2x8x64x50xf32> {
  %k = tensor.extract_slice %qkv[0, 0, 1, 0, 0] [2, 50, 1, 8, 64] [1, 1, 1, 1, 1]
      : tensor<2x50x3x8x64xf32> to tensor<2x50x8x64xf32>
  %e = tensor.empty() : tensor<2x8x64x50xf32>
  %y = linalg.generic {indexing_maps = [#id4, #kt], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
      ins(%k : tensor<2x50x8x64xf32>) outs(%e : tensor<2x8x64x50xf32>) {
  ^bb0(%a: f32, %o: f32):
    linalg.yield %a : f32
  } -> tensor<2x8x64x50xf32>
  return %y : tensor<2x8x64x50xf32>
}

func.func @main() {
  %z = arith.constant 0.0 : f32
  // x[i, j, k] = 10000 i + 100 j + k: exact in f32, all distinct.
  %ex = tensor.empty() : tensor<5x37x21xf32>
  %x = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%ex : tensor<5x37x21xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %k = linalg.index 2 : index
    %c10000 = arith.constant 10000 : index
    %c100 = arith.constant 100 : index
    %a = arith.muli %i, %c10000 : index
    %b = arith.muli %j, %c100 : index
    %s = arith.addi %a, %b : index
    %t = arith.addi %s, %k : index
    %v = arith.index_cast %t : index to i32
    %f = arith.sitofp %v : i32 to f32
    linalg.yield %f : f32
  } -> tensor<5x37x21xf32>
  %y = call @transpose3d(%x) : (tensor<5x37x21xf32>) -> tensor<5x21x37xf32>
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id3, #swap, #all3], iterator_types = ["reduction", "reduction", "reduction"]}
      ins(%x, %y : tensor<5x37x21xf32>, tensor<5x21x37xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %ad = math.absf %d : f32
    %s = arith.addf %acc, %ad : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %ev = tensor.extract %err[] : tensor<f32>
  %ok = arith.cmpf oeq, %ev, %z : f32
  %oki = arith.extui %ok : i1 to i64
  vector.print str "3d ok "
  vector.print %oki : i64

  // qkv[n, j, p, h, c] = 1000000 p + 100000 n + 1000 j + 64 h + c (< 2^24).
  %eq = tensor.empty() : tensor<2x50x3x8x64xf32>
  %qkv = linalg.generic {indexing_maps = [affine_map<(n, j, p, h, c) -> (n, j, p, h, c)>], iterator_types = ["parallel", "parallel", "parallel", "parallel", "parallel"]}
      outs(%eq : tensor<2x50x3x8x64xf32>) {
  ^bb0(%o: f32):
    %n = linalg.index 0 : index
    %j = linalg.index 1 : index
    %p = linalg.index 2 : index
    %h = linalg.index 3 : index
    %c = linalg.index 4 : index
    %c1000000 = arith.constant 1000000 : index
    %c100000 = arith.constant 100000 : index
    %c1000 = arith.constant 1000 : index
    %c64 = arith.constant 64 : index
    %a = arith.muli %p, %c1000000 : index
    %b = arith.muli %n, %c100000 : index
    %d = arith.muli %j, %c1000 : index
    %g = arith.muli %h, %c64 : index
    %s1 = arith.addi %a, %b : index
    %s2 = arith.addi %s1, %d : index
    %s3 = arith.addi %s2, %g : index
    %s4 = arith.addi %s3, %c : index
    %v = arith.index_cast %s4 : index to i32
    %f = arith.sitofp %v : i32 to f32
    linalg.yield %f : f32
  } -> tensor<2x50x3x8x64xf32>
  %kt = call @attention_kt(%qkv) : (tensor<2x50x3x8x64xf32>) -> tensor<2x8x64x50xf32>
  %k = tensor.extract_slice %qkv[0, 0, 1, 0, 0] [2, 50, 1, 8, 64] [1, 1, 1, 1, 1]
      : tensor<2x50x3x8x64xf32> to tensor<2x50x8x64xf32>
  %init2 = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err2 = linalg.generic {indexing_maps = [#id4, #kt, #all4], iterator_types = ["reduction", "reduction", "reduction", "reduction"]}
      ins(%k, %kt : tensor<2x50x8x64xf32>, tensor<2x8x64x50xf32>) outs(%init2 : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %ad = math.absf %d : f32
    %s = arith.addf %acc, %ad : f32
    linalg.yield %s : f32
  } -> tensor<f32>
  %ev2 = tensor.extract %err2[] : tensor<f32>
  %ok2 = arith.cmpf oeq, %ev2, %z : f32
  %oki2 = arith.extui %ok2 : i1 to i64
  vector.print str "kt ok "
  vector.print %oki2 : i64
  return
}
