// RUN: %if avx512bf16 %{ vmoe-opt %s --vmoe-lower-to-cpu="vector-width=16 bf16-dot=true" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s %}
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="vector-width=8" \
// RUN:   | mlir-runner -e main -entry-point-result=void \
// RUN:       -shared-libs=%mlir_runner_utils,%mlir_c_runner_utils | FileCheck %s

// A dense layer whose kernel is stored as bf16 pair panels, executed: the
// folded pair contraction (vmoe-vectorize-contractions: rows rounded per
// block of rows, pair microkernel, vdpbf16ps (first RUN) or shift + fma
// with 8 lanes (second RUN)) against the same product computed the plain
// way: the kernel widened by unpack_panels' copy, the rows rounded to bf16
// by an elementwise truncf + extf, an f32 contraction. M = 100 rows (two
// blocks of rounded rows: 56 rows of 544 words), K = 1087 (odd: the last
// pair's high half is 0; five blocks of 256 k, the last partial), N = 560
// (three blocks of columns, the last panel partial). Inputs are exact f32
// expressions; the products are exact, so the two differ only by f32
// summation order: max |difference| <= 1e-4 (measured 1.2e-6 on both
// paths), while a wrong pair, half or rounding moves outputs by ~2^-9 |y|
// or more (the plain way without rounding the rows: 8.4e-3). The IR
// prints 1 when within the bound. The first RUN needs a host with
// AVX512_BF16 (lit's avx512bf16 feature); the second runs anywhere.

// CHECK: ok 1

#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
#id2 = affine_map<(i, j) -> (i, j)>
#id3 = affine_map<(i, j, l) -> (i, j, l)>
#all = affine_map<(i, j) -> ()>

// y = x . w, w read from the bf16 pair panels (folded into the contraction).
func.func @pairs(%x: tensor<100x1087xf32>, %p: tensor<35x544x16xf32>) -> tensor<100x560xf32> {
  %z = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<100x560xf32>
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<100x560xf32>) -> tensor<100x560xf32>
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<35x544x16xf32> -> tensor<1087x560xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<100x1087xf32>, tensor<1087x560xf32>) outs(%init : tensor<100x560xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<100x560xf32>
  return %y : tensor<100x560xf32>
}

// The same product the plain way: widened kernel (an elementwise use keeps
// the unpack a copy), rows rounded to bf16 first, f32 contraction.
func.func @plain(%x: tensor<100x1087xf32>, %p: tensor<35x544x16xf32>) -> tensor<100x560xf32> {
  %z = arith.constant 0.0 : f32
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<35x544x16xf32> -> tensor<1087x560xf32>
  %ew = tensor.empty() : tensor<1087x560xf32>
  %wc = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%w : tensor<1087x560xf32>) outs(%ew : tensor<1087x560xf32>) {
  ^bb0(%a: f32, %o: f32):
    %s = arith.addf %a, %z : f32
    linalg.yield %s : f32
  } -> tensor<1087x560xf32>
  %ex = tensor.empty() : tensor<100x1087xf32>
  %xr = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<100x1087xf32>) outs(%ex : tensor<100x1087xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = arith.truncf %a : f32 to bf16
    %r = arith.extf %t : bf16 to f32
    linalg.yield %r : f32
  } -> tensor<100x1087xf32>
  %e = tensor.empty() : tensor<100x560xf32>
  %init = linalg.fill ins(%z : f32) outs(%e : tensor<100x560xf32>) -> tensor<100x560xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%xr, %wc : tensor<100x1087xf32>, tensor<1087x560xf32>) outs(%init : tensor<100x560xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<100x560xf32>
  return %y : tensor<100x560xf32>
}

func.func @main() {
  // x[i, j] = frac((7i + j) * 0.01234567) - 0.5: most values not bf16.
  %ex = tensor.empty() : tensor<100x1087xf32>
  %x = linalg.generic {indexing_maps = [#id2], iterator_types = ["parallel", "parallel"]}
      outs(%ex : tensor<100x1087xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = linalg.index 1 : index
    %c7 = arith.constant 7 : index
    %t = arith.muli %i, %c7 : index
    %u = arith.addi %t, %j : index
    %v = arith.index_cast %u : index to i32
    %f = arith.sitofp %v : i32 to f32
    %k1 = arith.constant 0.01234567 : f32
    %h = arith.constant 0.5 : f32
    %s0 = arith.mulf %f, %k1 : f32
    %s1 = math.floor %s0 : f32
    %s2 = arith.subf %s0, %s1 : f32
    %s = arith.subf %s2, %h : f32
    linalg.yield %s : f32
  } -> tensor<100x1087xf32>
  // Pair words [p, j, l]: bf16 of frac(0.0137 f) - 1 in the low half (k even),
  // of frac(0.0291 f) in the high half, f = 3p + 5j + l; zero past K and N.
  %ep = tensor.empty() : tensor<35x544x16xf32>
  %p = linalg.generic {indexing_maps = [#id3], iterator_types = ["parallel", "parallel", "parallel"]}
      outs(%ep : tensor<35x544x16xf32>) {
  ^bb0(%o: f32):
    %a = linalg.index 0 : index
    %b = linalg.index 1 : index
    %c = linalg.index 2 : index
    %c3 = arith.constant 3 : index
    %c5 = arith.constant 5 : index
    %c16i = arith.constant 16 : index
    %c543 = arith.constant 543 : index
    %c560 = arith.constant 560 : index
    %t = arith.muli %a, %c3 : index
    %t2 = arith.muli %b, %c5 : index
    %u = arith.addi %t, %t2 : index
    %u2 = arith.addi %u, %c : index
    %v = arith.index_cast %u2 : index to i32
    %f = arith.sitofp %v : i32 to f32
    %k2 = arith.constant 0.0137 : f32
    %k3 = arith.constant 0.0291 : f32
    %o1 = arith.constant 1.0 : f32
    %l0 = arith.mulf %f, %k2 : f32
    %lf = math.floor %l0 : f32
    %lo0 = arith.subf %l0, %lf : f32
    %lo = arith.subf %lo0, %o1 : f32
    %h0 = arith.mulf %f, %k3 : f32
    %hf = math.floor %h0 : f32
    %hi = arith.subf %h0, %hf : f32
    %lb = arith.bitcast %lo : f32 to i32
    %hb = arith.bitcast %hi : f32 to i32
    %c16 = arith.constant 16 : i32
    %mask = arith.constant -65536 : i32
    %zero = arith.constant 0 : i32
    %l1 = arith.shrui %lb, %c16 : i32
    %h1 = arith.andi %hb, %mask : i32
    // k = 2j + 1 = 1087 is past K: its high half is 0; so are columns past N.
    %lastpair = arith.cmpi eq, %b, %c543 : index
    %h2 = arith.select %lastpair, %zero, %h1 : i32
    %word = arith.ori %l1, %h2 : i32
    %n0 = arith.muli %a, %c16i : index
    %n = arith.addi %n0, %c : index
    %past = arith.cmpi uge, %n, %c560 : index
    %word2 = arith.select %past, %zero, %word : i32
    %wf = arith.bitcast %word2 : i32 to f32
    linalg.yield %wf : f32
  } -> tensor<35x544x16xf32>
  %y1 = call @pairs(%x, %p) : (tensor<100x1087xf32>, tensor<35x544x16xf32>) -> tensor<100x560xf32>
  %y2 = call @plain(%x, %p) : (tensor<100x1087xf32>, tensor<35x544x16xf32>) -> tensor<100x560xf32>
  %z = arith.constant 0.0 : f32
  %e0 = tensor.empty() : tensor<f32>
  %init = linalg.fill ins(%z : f32) outs(%e0 : tensor<f32>) -> tensor<f32>
  %err = linalg.generic {indexing_maps = [#id2, #id2, #all], iterator_types = ["reduction", "reduction"]}
      ins(%y1, %y2 : tensor<100x560xf32>, tensor<100x560xf32>) outs(%init : tensor<f32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %d = arith.subf %a, %b : f32
    %ad = math.absf %d : f32
    %mx = arith.maximumf %acc, %ad : f32
    linalg.yield %mx : f32
  } -> tensor<f32>
  %ev = tensor.extract %err[] : tensor<f32>
  %tol = arith.constant 1.0e-4 : f32
  %ok = arith.cmpf ole, %ev, %tol : f32
  %oki = arith.extui %ok : i1 to i64
  vector.print str "ok "
  vector.print %oki : i64
  return
}
