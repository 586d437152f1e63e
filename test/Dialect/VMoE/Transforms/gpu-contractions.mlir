// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-contractions | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-contractions="mma=tf32" | FileCheck %s --check-prefix=TF32
// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-contractions="mma=bf16" | FileCheck %s --check-prefix=BF16
// RUN: not vmoe-opt %s -split-input-file -vmoe-gpu-contractions="mma=fp8" 2>&1 | FileCheck %s --check-prefix=BAD

// Top-level f32 contractions on buffers become one tiled GEMM kernel each
// (64 x 64 tiles, 16 x 16 threads; tensor cores with mma=tf32|bf16), the
// operands read through the op's maps and the sum started from the output.

// BAD: vmoe-gpu-contractions: mma must be none, tf32 or bf16, got 'fp8'

/// linear (lib/Frontend/Layers.cpp): x [M, K] . w [K, N], loops (m, k, n).
/// A and B row-major: A staged along k (tile rows of 16), B along n (64).
// CHECK-LABEL: func.func @linear
// CHECK-SAME: (%[[X:.*]]: memref<50x40xf32>, %[[W:.*]]: memref<40x70xf32>, %[[C:.*]]: memref<50x70xf32>)
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch {{.*}} threads({{.*}}) in ({{.*}} = %c16{{.*}}, {{.*}} = %c16{{.*}}, {{.*}} = %c1{{.*}}) workgroup(%[[AT:.*]] : memref<64x16xf32, #gpu.address_space<workgroup>>, %[[BT:.*]] : memref<16x64xf32, #gpu.address_space<workgroup>>)
// CHECK:   memref.load %[[C]][%{{.*}}, %{{.*}}] : memref<50x70xf32>
// CHECK:   scf.for %{{.*}} = %c0{{.*}} to %c40{{.*}} step %c16
// CHECK:     memref.load %[[X]][%{{.*}}, %{{.*}}] : memref<50x40xf32>
// CHECK:     memref.load %[[W]][%{{.*}}, %{{.*}}] : memref<40x70xf32>
// CHECK:     gpu.barrier
// CHECK:     math.fma
// CHECK:   memref.store %{{.*}}, %[[C]][%{{.*}}, %{{.*}}] : memref<50x70xf32>
// CHECK-NOT: linalg.generic
// TF32-LABEL: func.func @linear
// TF32-NOT: linalg.generic
// TF32: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
// BF16-LABEL: func.func @linear
// BF16-NOT: linalg.generic
// BF16: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<bf16>
func.func @linear(%x: memref<50x40xf32>, %w: memref<40x70xf32>, %c: memref<50x70xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<50x40xf32>, memref<40x70xf32>) outs(%c : memref<50x70xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}

// -----

/// The same product after vmoe-contract-to-fma (body math.fma), operands
/// swapped (B first), and as a named linalg.matmul.
// CHECK-LABEL: func.func @fma_body_and_named
// CHECK-SAME: (%[[X:.*]]: memref<8x4xf32>, %[[W:.*]]: memref<4x24xf32>, %[[C:.*]]: memref<8x24xf32>)
// CHECK-NOT: linalg.
// CHECK: gpu.launch
// CHECK:   memref.load %[[X]]
// CHECK:   memref.load %[[W]]
// CHECK:   memref.store %{{.*}}, %[[C]]
// CHECK: gpu.launch
// CHECK:   memref.load %[[X]]
// CHECK:   memref.load %[[W]]
// CHECK:   memref.store %{{.*}}, %[[C]]
// CHECK-NOT: linalg.
// TF32-LABEL: func.func @fma_body_and_named
// TF32-COUNT-2: nvvm.mma.sync {{.*}}multiplicandAPtxType = #nvvm.mma_type<tf32>
func.func @fma_body_and_named(%x: memref<8x4xf32>, %w: memref<4x24xf32>, %c: memref<8x24xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, k)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%w, %x : memref<4x24xf32>, memref<8x4xf32>) outs(%c : memref<8x24xf32>) {
  ^bb0(%b: f32, %a: f32, %acc: f32):
    %s = math.fma %b, %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c : memref<8x24xf32>)
  return
}

// -----

/// Attention scores (lib/Frontend/Attention.cpp): loops (n, h, i, j, c),
/// q [N, T, heads, dh] and kT [N, heads, dh, T] strided views of one
/// buffer. Rows i, columns j, batch n * heads + h (n = z / heads, h = z mod
/// heads).
// CHECK-LABEL: func.func @attention_scores
// CHECK-SAME: (%[[QKV:.*]]: memref<2x5x3x2x4xf32>, %[[KT:.*]]: memref<2x2x4x5xf32>, %[[S:.*]]: memref<2x2x5x5xf32>)
// CHECK: %[[Q:.*]] = memref.subview %[[QKV]]
// CHECK-NOT: linalg.generic
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>)
// CHECK:   %[[N:.*]] = arith.divui %{{.*}}, %c2{{.*}} : index
// CHECK:   %[[H:.*]] = arith.remui %{{.*}}, %c2{{.*}} : index
// CHECK:   memref.load %[[S]][%[[N]], %[[H]], %{{.*}}, %{{.*}}]
// CHECK:   scf.for
// CHECK:     memref.load %[[Q]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x5x2x4xf32, strided<[120, 24, 4, 1]>>
// CHECK:     memref.load %[[KT]][%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}] : memref<2x2x4x5xf32>
// CHECK:   memref.store %{{.*}}, %[[S]]
func.func @attention_scores(%qkv: memref<2x5x3x2x4xf32>, %kT: memref<2x2x4x5xf32>, %s: memref<2x2x5x5xf32>) {
  %q = memref.subview %qkv[0, 0, 0, 0, 0] [2, 5, 1, 2, 4] [1, 1, 1, 1, 1]
      : memref<2x5x3x2x4xf32> to memref<2x5x2x4xf32, strided<[120, 24, 4, 1]>>
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, c, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kT : memref<2x5x2x4xf32, strided<[120, 24, 4, 1]>>, memref<2x2x4x5xf32>)
      outs(%s : memref<2x2x5x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %r = math.fma %a, %b, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Q K^T straight from the keys k [N, T, heads, dh] (no kT copy): B has k
/// (c) as its last index, so its tile is staged along k (rows of 65).
// CHECK-LABEL: func.func @attention_scores_transposed_keys
// CHECK-SAME: (%[[QKV:.*]]: memref<2x5x3x2x4xf32>, %[[S:.*]]: memref<2x2x5x5xf32>)
// CHECK: %[[Q:.*]] = memref.subview %[[QKV]][0, 0, 0, 0, 0]
// CHECK: %[[K:.*]] = memref.subview %[[QKV]][0, 0, 1, 0, 0]
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x65xf32, #gpu.address_space<workgroup>>)
// CHECK:     memref.load %[[Q]]
// CHECK:     memref.load %[[K]]
// CHECK:   memref.store %{{.*}}, %[[S]]
func.func @attention_scores_transposed_keys(%qkv: memref<2x5x3x2x4xf32>, %s: memref<2x2x5x5xf32>) {
  %q = memref.subview %qkv[0, 0, 0, 0, 0] [2, 5, 1, 2, 4] [1, 1, 1, 1, 1]
      : memref<2x5x3x2x4xf32> to memref<2x5x2x4xf32, strided<[120, 24, 4, 1]>>
  %k = memref.subview %qkv[0, 0, 1, 0, 0] [2, 5, 1, 2, 4] [1, 1, 1, 1, 1]
      : memref<2x5x3x2x4xf32> to memref<2x5x2x4xf32, strided<[120, 24, 4, 1], offset: 8>>
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, j, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : memref<2x5x2x4xf32, strided<[120, 24, 4, 1]>>,
                   memref<2x5x2x4xf32, strided<[120, 24, 4, 1], offset: 8>>)
      outs(%s : memref<2x2x5x5xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %r = math.fma %a, %b, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Attention context: loops (n, h, i, j, c), probs [N, heads, T, T] times
/// v [N, T, heads, dh] (a strided view) into context [N, T, heads, dh]:
/// rows i, columns c, reduction j.
// CHECK-LABEL: func.func @attention_context
// CHECK-SAME: (%[[P:.*]]: memref<2x2x5x5xf32>, %[[QKV:.*]]: memref<2x5x3x2x4xf32>, %[[O:.*]]: memref<2x5x2x4xf32>)
// CHECK: %[[V:.*]] = memref.subview %[[QKV]][0, 0, 2, 0, 0]
// CHECK: gpu.launch {{.*}} workgroup(%{{.*}} : memref<64x16xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<16x64xf32, #gpu.address_space<workgroup>>)
// CHECK:   memref.load %[[O]]
// CHECK:   scf.for %{{.*}} = %c0{{.*}} to %c5{{.*}} step %c16
// CHECK:     memref.load %[[P]]
// CHECK:     memref.load %[[V]]
// CHECK:   memref.store %{{.*}}, %[[O]]
func.func @attention_context(%p: memref<2x2x5x5xf32>, %qkv: memref<2x5x3x2x4xf32>, %o: memref<2x5x2x4xf32>) {
  %v = memref.subview %qkv[0, 0, 2, 0, 0] [2, 5, 1, 2, 4] [1, 1, 1, 1, 1]
      : memref<2x5x3x2x4xf32> to memref<2x5x2x4xf32, strided<[120, 24, 4, 1], offset: 16>>
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, h, i, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, j, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, i, h, c)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%p, %v : memref<2x2x5x5xf32>, memref<2x5x2x4xf32, strided<[120, 24, 4, 1], offset: 16>>)
      outs(%o : memref<2x5x2x4xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %r = math.fma %a, %b, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// The expert matmul of ExpertLowering.cpp: loops (e, g, b, k, n),
/// in [E, G, B, D] times w [E, D, H]. Rows b (the innermost of g, b), batch
/// e * G + g (e = z / G, g = z mod G); w is indexed by e only.
// CHECK-LABEL: func.func @expert_matmul
// CHECK-SAME: (%[[IN:.*]]: memref<4x3x7x20xf32>, %[[W:.*]]: memref<4x20x36xf32>, %[[OUT:.*]]: memref<4x3x7x36xf32>)
// CHECK: %[[Z:.*]] = arith.constant 12 : index
// CHECK: gpu.launch
// CHECK:   scf.for %[[BATCH:.*]] = %{{.*}} to %[[Z]]
// CHECK:     scf.for %{{.*}} = %{{.*}} to %c7
// CHECK:       %[[E0:.*]] = arith.divui %[[BATCH]], %c3{{.*}} : index
// CHECK:       %[[G0:.*]] = arith.remui %[[BATCH]], %c3{{.*}} : index
// CHECK:       memref.load %[[OUT]][%[[E0]], %[[G0]], %{{.*}}, %{{.*}}] : memref<4x3x7x36xf32>
// CHECK:       scf.for
// CHECK:         %[[E:.*]] = arith.divui %[[BATCH]], %c3{{.*}} : index
// CHECK:         %[[G:.*]] = arith.remui %[[BATCH]], %c3{{.*}} : index
// CHECK:         memref.load %[[IN]][%[[E]], %[[G]], %{{.*}}, %{{.*}}] : memref<4x3x7x20xf32>
// CHECK-COUNT-3: memref.load %[[IN]]
// CHECK:         %[[E2:.*]] = arith.divui %[[BATCH]], %c3{{.*}} : index
// CHECK-NEXT:    memref.load %[[W]][%[[E2]], %{{.*}}, %{{.*}}] : memref<4x20x36xf32>
// CHECK:   memref.store %{{.*}}, %[[OUT]]
func.func @expert_matmul(%in: memref<4x3x7x20xf32>, %w: memref<4x20x36xf32>, %out: memref<4x3x7x36xf32>) {
  linalg.generic {indexing_maps = [affine_map<(e, g, b, k, n) -> (e, g, b, k)>,
                                   affine_map<(e, g, b, k, n) -> (e, k, n)>,
                                   affine_map<(e, g, b, k, n) -> (e, g, b, n)>],
                  iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%in, %w : memref<4x3x7x20xf32>, memref<4x20x36xf32>) outs(%out : memref<4x3x7x36xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %r = math.fma %a, %b, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Router logits (marked by convert-vmoe-to-scf) stay on FP32 products in
/// every mode: routing decisions depend on their exact values.
// CHECK-LABEL: func.func @router_logits
// CHECK: gpu.launch
// CHECK:   math.fma
// TF32-LABEL: func.func @router_logits
// TF32-NOT: nvvm.mma.sync
// TF32: math.fma
// TF32-NOT: nvvm.mma.sync
// TF32-LABEL: func.func @dynamic
// BF16-LABEL: func.func @router_logits
// BF16-NOT: nvvm.mma.sync
// BF16: math.fma
// BF16-NOT: nvvm.mma.sync
// BF16-LABEL: func.func @dynamic
func.func @router_logits(%x: memref<2x40x16xf32>, %r: memref<16x8xf32>, %logits: memref<2x40x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(g, s, d, e) -> (g, s, d)>, affine_map<(g, s, d, e) -> (d, e)>,
                                   affine_map<(g, s, d, e) -> (g, s, e)>],
                  iterator_types = ["parallel", "parallel", "reduction", "parallel"]}
      ins(%x, %r : memref<2x40x16xf32>, memref<16x8xf32>) outs(%logits : memref<2x40x8xf32>)
      attrs = {vmoe.router_logits} {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %y = math.fma %a, %b, %acc : f32
    linalg.yield %y : f32
  }
  return
}

// -----

/// A dynamic product: sizes from the memrefs; no block runs without
/// columns (rows = n > 0 ? m : 0).
// CHECK-LABEL: func.func @dynamic
// CHECK-SAME: (%[[A:.*]]: memref<?x?xf32>, %[[B:.*]]: memref<?x?xf32>, %[[C:.*]]: memref<?x?xf32>)
// CHECK-DAG: %[[M:.*]] = memref.dim %[[A]], %c0
// CHECK-DAG: %[[N:.*]] = memref.dim %[[B]], %c1
// CHECK: %[[POS:.*]] = arith.cmpi sgt, %[[N]], %c0
// CHECK: %[[ROWS:.*]] = arith.select %[[POS]], %[[M]], %c0
// CHECK: gpu.launch
// CHECK:   arith.cmpi slt, %{{.*}}, %[[ROWS]]
func.func @dynamic(%a: memref<?x?xf32>, %b: memref<?x?xf32>, %c: memref<?x?xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<?x?xf32>, memref<?x?xf32>) outs(%c : memref<?x?xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %r = math.fma %x, %y, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Inside a parallel loop or a kernel the op runs in one thread: left for
/// vmoe-gpu-linalg-to-loops.
// CHECK-LABEL: func.func @negative_nested
// CHECK: scf.forall
// CHECK:   linalg.matmul
// CHECK: scf.parallel
// CHECK:   linalg.matmul
// CHECK: gpu.launch
// CHECK:   linalg.matmul
// CHECK-NOT: workgroup(
func.func @negative_nested(%a: memref<3x8x4xf32>, %b: memref<4x8xf32>, %c: memref<3x8x8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  scf.forall (%i) in (3) {
    %ai = memref.subview %a[%i, 0, 0] [1, 8, 4] [1, 1, 1] : memref<3x8x4xf32> to memref<8x4xf32, strided<[4, 1], offset: ?>>
    %ci = memref.subview %c[%i, 0, 0] [1, 8, 8] [1, 1, 1] : memref<3x8x8xf32> to memref<8x8xf32, strided<[8, 1], offset: ?>>
    linalg.matmul ins(%ai, %b : memref<8x4xf32, strided<[4, 1], offset: ?>>, memref<4x8xf32>)
                  outs(%ci : memref<8x8xf32, strided<[8, 1], offset: ?>>)
  }
  scf.parallel (%i) = (%c0) to (%c3) step (%c1) {
    %ai = memref.subview %a[%i, 0, 0] [1, 8, 4] [1, 1, 1] : memref<3x8x4xf32> to memref<8x4xf32, strided<[4, 1], offset: ?>>
    %ci = memref.subview %c[%i, 0, 0] [1, 8, 8] [1, 1, 1] : memref<3x8x8xf32> to memref<8x8xf32, strided<[8, 1], offset: ?>>
    linalg.matmul ins(%ai, %b : memref<8x4xf32, strided<[4, 1], offset: ?>>, memref<4x8xf32>)
                  outs(%ci : memref<8x8xf32, strided<[8, 1], offset: ?>>)
    scf.reduce
  }
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    %ai = memref.subview %a[0, 0, 0] [1, 8, 4] [1, 1, 1] : memref<3x8x4xf32> to memref<8x4xf32, strided<[4, 1]>>
    %ci = memref.subview %c[0, 0, 0] [1, 8, 8] [1, 1, 1] : memref<3x8x8xf32> to memref<8x8xf32, strided<[8, 1]>>
    linalg.matmul ins(%ai, %b : memref<8x4xf32, strided<[4, 1]>>, memref<4x8xf32>)
                  outs(%ci : memref<8x8xf32, strided<[8, 1]>>)
    gpu.terminator
  }
  return
}

// -----

/// Not f32 (f16 operands, and an f32 sum of bf16 products).
// CHECK-LABEL: func.func @negative_not_f32
// CHECK-NOT: gpu.launch
// CHECK: linalg.matmul
// CHECK: linalg.generic
func.func @negative_not_f32(%a: memref<8x4xf16>, %b: memref<4x8xf16>, %c: memref<8x8xf16>,
                            %x: memref<8x4xbf16>, %w: memref<4x8xbf16>, %o: memref<8x8xf32>) {
  linalg.matmul ins(%a, %b : memref<8x4xf16>, memref<4x8xf16>) outs(%c : memref<8x8xf16>)
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : memref<8x4xbf16>, memref<4x8xbf16>) outs(%o : memref<8x8xf32>) {
  ^bb0(%p: bf16, %q: bf16, %acc: f32):
    %pe = arith.extf %p : bf16 to f32
    %qe = arith.extf %q : bf16 to f32
    %r = math.fma %pe, %qe, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Bodies other than a multiply-accumulate: a max of products, a square
/// of one input, and acc * (a + b).
// CHECK-LABEL: func.func @negative_not_mac
// CHECK-NOT: gpu.launch
// CHECK-COUNT-3: linalg.generic
func.func @negative_not_mac(%a: memref<8x4xf32>, %b: memref<4x8xf32>, %c: memref<8x8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.maximumf %acc, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %r = math.fma %x, %x, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %s = arith.addf %x, %y : f32
    %r = arith.mulf %acc, %s : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Two reduction dims (k1, k2), and none (an outer product: no sum).
// CHECK-LABEL: func.func @negative_reductions
// CHECK-NOT: gpu.launch
// CHECK-COUNT-2: linalg.generic
func.func @negative_reductions(%a: memref<8x2x4xf32>, %b: memref<2x4x8xf32>, %c: memref<8x8xf32>,
                               %u: memref<8xf32>, %v: memref<8xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k1, k2, n) -> (m, k1, k2)>,
                                   affine_map<(m, k1, k2, n) -> (k1, k2, n)>,
                                   affine_map<(m, k1, k2, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "reduction", "parallel"]}
      ins(%a, %b : memref<8x2x4xf32>, memref<2x4x8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %r = math.fma %x, %y, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n) -> (m)>, affine_map<(m, n) -> (n)>,
                                   affine_map<(m, n) -> (m, n)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%u, %v : memref<8xf32>, memref<8xf32>) outs(%c : memref<8x8xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %r = math.fma %x, %y, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Matrix-vector products: no column dim (A x), no row dim (x^T B), and a
/// batched dot product (no row nor column dim).
// CHECK-LABEL: func.func @negative_matvec
// CHECK-NOT: gpu.launch
// CHECK-COUNT-3: linalg.generic
func.func @negative_matvec(%a: memref<8x4xf32>, %x: memref<4xf32>, %y: memref<8xf32>,
                           %b: memref<4x8xf32>, %p: memref<3x4xf32>, %q: memref<3x4xf32>,
                           %d: memref<3xf32>) {
  linalg.generic {indexing_maps = [affine_map<(m, k) -> (m, k)>, affine_map<(m, k) -> (k)>,
                                   affine_map<(m, k) -> (m)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%a, %x : memref<8x4xf32>, memref<4xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %r = math.fma %u, %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(k, n) -> (k)>, affine_map<(k, n) -> (k, n)>,
                                   affine_map<(k, n) -> (n)>],
                  iterator_types = ["reduction", "parallel"]}
      ins(%x, %b : memref<4xf32>, memref<4x8xf32>) outs(%y : memref<8xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %r = math.fma %u, %v, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(i, k) -> (i, k)>, affine_map<(i, k) -> (i, k)>,
                                   affine_map<(i, k) -> (i)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%p, %q : memref<3x4xf32>, memref<3x4xf32>) outs(%d : memref<3xf32>) {
  ^bb0(%u: f32, %v: f32, %acc: f32):
    %r = math.fma %u, %v, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// Tensors (before bufferization) are left alone.
// CHECK-LABEL: func.func @negative_tensors
// CHECK-NOT: gpu.launch
// CHECK: linalg.matmul
func.func @negative_tensors(%a: tensor<8x4xf32>, %b: tensor<4x8xf32>, %c: tensor<8x8xf32>) -> tensor<8x8xf32> {
  %r = linalg.matmul ins(%a, %b : tensor<8x4xf32>, tensor<4x8xf32>) outs(%c : tensor<8x8xf32>) -> tensor<8x8xf32>
  return %r : tensor<8x8xf32>
}

// -----

/// An output that is a view of an input's buffer (C = A B in place of A's
/// memory): blocks would overwrite what others still read.
// CHECK-LABEL: func.func @negative_output_aliases_input
// CHECK-NOT: gpu.launch
// CHECK: linalg.generic
func.func @negative_output_aliases_input(%buf: memref<8x8xf32>, %b: memref<8x8xf32>) {
  %c = memref.subview %buf[0, 0] [8, 8] [1, 1] : memref<8x8xf32> to memref<8x8xf32, strided<[8, 1]>>
  linalg.generic {indexing_maps = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>,
                                   affine_map<(m, k, n) -> (m, n)>],
                  iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%buf, %b : memref<8x8xf32>, memref<8x8xf32>) outs(%c : memref<8x8xf32, strided<[8, 1]>>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %r = math.fma %x, %y, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

/// An output just filled with +0.0 needs no initial read: the sums start
/// from 0.0 and the fill goes (the kernel writes every element).
// CHECK-LABEL: func.func @zero_filled_output
// CHECK: %[[C:.*]] = memref.alloc() : memref<8x24xf32>
// CHECK-NOT: linalg.fill
// CHECK: gpu.launch
// CHECK-NOT: memref.load %[[C]]
// CHECK: memref.store %{{.*}}, %[[C]]
// CHECK: memref.copy %[[C]], %{{.*}}
func.func @zero_filled_output(%x: memref<8x4xf32>, %w: memref<4x24xf32>, %out: memref<8x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x24xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x24xf32>)
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c : memref<8x24xf32>)
  memref.copy %c, %out : memref<8x24xf32> to memref<8x24xf32>
  return
}

// -----

/// An output copied from a zero-filled buffer (one-shot bufferization's
/// form of two products sharing one zero tensor): the copy goes, the fill
/// of the source stays for its other readers.
// CHECK-LABEL: func.func @zero_copied_output
// CHECK: %[[Z:.*]] = memref.alloc() : memref<8x24xf32>
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%[[Z]] : memref<8x24xf32>)
// CHECK: %[[C:.*]] = memref.alloc() : memref<8x24xf32>
// CHECK-NOT: memref.copy %[[Z]], %[[C]]
// CHECK: gpu.launch
// CHECK-NOT: memref.load %[[C]]
// CHECK: memref.store %{{.*}}, %[[C]]
// CHECK: memref.copy %[[Z]], %{{.*}}
func.func @zero_copied_output(%x: memref<8x4xf32>, %w: memref<4x24xf32>, %out: memref<8x24xf32>,
                              %other: memref<8x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %z = memref.alloc() : memref<8x24xf32>
  linalg.fill ins(%zero : f32) outs(%z : memref<8x24xf32>)
  %c = memref.alloc() : memref<8x24xf32>
  memref.copy %z, %c : memref<8x24xf32> to memref<8x24xf32>
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c : memref<8x24xf32>)
  memref.copy %c, %out : memref<8x24xf32> to memref<8x24xf32>
  memref.copy %z, %other : memref<8x24xf32> to memref<8x24xf32>
  return
}

// -----

/// A zero output read before the product: the kernel still starts from
/// 0.0, but the fill stays for the copy.
// CHECK-LABEL: func.func @zero_output_read_before
// CHECK: %[[C:.*]] = memref.alloc()
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[C]] :
// CHECK-NEXT: memref.copy %[[C]], %{{.*}}
// CHECK: gpu.launch
// CHECK-NOT: memref.load %[[C]]
// CHECK: memref.store %{{.*}}, %[[C]]
func.func @zero_output_read_before(%x: memref<8x4xf32>, %w: memref<4x24xf32>, %out: memref<8x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<8x24xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<8x24xf32>)
  memref.copy %c, %out : memref<8x24xf32> to memref<8x24xf32>
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c : memref<8x24xf32>)
  memref.copy %c, %out : memref<8x24xf32> to memref<8x24xf32>
  return
}

// -----

/// Outputs that are not known to be zero: a fill with 1.0, a zero fill of
/// a function argument (the caller may read it through an alias), and a
/// zero buffer written after its fill and before the copy: each product
/// reads its initial output, and the initializers stay.
// CHECK-LABEL: func.func @negative_zero_init
// CHECK: %[[C1:.*]] = memref.alloc()
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[C1]] :
// CHECK: gpu.launch
// CHECK:   memref.load %[[C1]][
// CHECK: linalg.fill ins(%{{.*}} : f32) outs(%arg3 :
// CHECK: gpu.launch
// CHECK:   memref.load %arg3[
// CHECK: %[[Z:.*]] = memref.alloc()
// CHECK-NEXT: linalg.fill ins(%{{.*}} : f32) outs(%[[Z]] :
// CHECK-NEXT: memref.store
// CHECK-NEXT: %[[C3:.*]] = memref.alloc()
// CHECK-NEXT: memref.copy %[[Z]], %[[C3]]
// CHECK: gpu.launch
// CHECK:   memref.load %[[C3]][
func.func @negative_zero_init(%x: memref<8x4xf32>, %w: memref<4x24xf32>, %out: memref<8x24xf32>,
                              %arg: memref<8x24xf32>) {
  %zero = arith.constant 0.0 : f32
  %one = arith.constant 1.0 : f32
  %i = arith.constant 1 : index
  %c1 = memref.alloc() : memref<8x24xf32>
  linalg.fill ins(%one : f32) outs(%c1 : memref<8x24xf32>)
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c1 : memref<8x24xf32>)
  linalg.fill ins(%zero : f32) outs(%arg : memref<8x24xf32>)
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%arg : memref<8x24xf32>)
  %z = memref.alloc() : memref<8x24xf32>
  linalg.fill ins(%zero : f32) outs(%z : memref<8x24xf32>)
  memref.store %one, %z[%i, %i] : memref<8x24xf32>
  %c3 = memref.alloc() : memref<8x24xf32>
  memref.copy %z, %c3 : memref<8x24xf32> to memref<8x24xf32>
  linalg.matmul ins(%x, %w : memref<8x4xf32>, memref<4x24xf32>) outs(%c3 : memref<8x24xf32>)
  memref.copy %c1, %out : memref<8x24xf32> to memref<8x24xf32>
  memref.copy %c3, %out : memref<8x24xf32> to memref<8x24xf32>
  return
}
