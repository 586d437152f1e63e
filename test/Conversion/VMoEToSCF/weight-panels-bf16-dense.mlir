// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="vector-width=32" | FileCheck %s --check-prefix=WIDE
// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-scf="bf16-dot=true" | FileCheck %s --check-prefix=DOT

// Dense kernels stored as bf16 pair panels (--precision=bf16): the
// contraction reading the unpacked kernel as its B (k, n) operand reads the
// pair words in place through (n floordiv 16, k floordiv 2, n mod 16), and
// its body becomes the bf16 pair product: A rounded to bf16 (truncf +
// extf), the weight the high half of its word for odd k (linalg.index of
// the reduction dim), else the low half shifted left by 16.
// CHECK-DAG: #[[$A:.*]] = affine_map<(d0, d1, d2) -> (d0, d1)>
// CHECK-DAG: #[[$P:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1 floordiv 2, d2 mod 16)>
// CHECK-LABEL: func.func @dense_kernel_bf16_pairs
// CHECK-SAME: %[[X:.*]]: tensor<8x32xf32>, %[[PAIRS:.*]]: tensor<3x16x16xf32>
// CHECK-NOT: vmoe.unpack_panels
// CHECK: linalg.generic {indexing_maps = [#[[$A]], #[[$P]], #{{.*}}]
// CHECK-SAME: ins(%[[X]], %[[PAIRS]] : tensor<8x32xf32>, tensor<3x16x16xf32>)
// CHECK: ^bb0(%[[IN:.*]]: f32, %[[WORD:.*]]: f32, %[[ACC:.*]]: f32):
// CHECK: %[[K:.*]] = linalg.index 1 : index
// CHECK: %[[REM:.*]] = arith.remui %[[K]], %{{.*}} : index
// CHECK: %[[ODD:.*]] = arith.cmpi ne, %[[REM]], %{{.*}} : index
// CHECK: %[[BITS:.*]] = arith.bitcast %[[WORD]] : f32 to i32
// CHECK: %[[HIGH:.*]] = arith.andi %[[BITS]], %{{.*}} : i32
// CHECK: %[[LOW:.*]] = arith.shli %[[BITS]], %{{.*}} : i32
// CHECK: %[[HALF:.*]] = arith.select %[[ODD]], %[[HIGH]], %[[LOW]] : i32
// CHECK: %[[W:.*]] = arith.bitcast %[[HALF]] : i32 to f32
// CHECK: %[[T:.*]] = arith.truncf %[[IN]] : f32 to bf16
// CHECK: %[[R:.*]] = arith.extf %[[T]] : bf16 to f32
// CHECK: %[[P:.*]] = arith.mulf %[[R]], %[[W]] : f32
// CHECK: %[[S:.*]] = arith.addf %[[ACC]], %[[P]] : f32
// CHECK: linalg.yield %[[S]] : f32
// CHECK-NOT: linalg.generic
// Panels of 16 with 32 vector lanes (WIDE) are not folded: a widening copy.
// WIDE-LABEL: func.func @dense_kernel_bf16_pairs
// WIDE: ins(%{{.*}} : tensor<3x16x16xf32>)
// WIDE-NOT: arith.truncf
// WIDE: return
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_kernel_bf16_pairs(%x: tensor<8x32xf32>, %p: tensor<3x16x16xf32>,
                                   %init: tensor<8x48xf32>) -> tensor<8x48xf32> {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<3x16x16xf32> -> tensor<32x48xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<8x32xf32>, tensor<32x48xf32>) outs(%init : tensor<8x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

// An odd K (5 pairs, the last with 0 in its high half) and a body with
// its product and sum commuted: folded the same way.
// CHECK-DAG: #[[$P3:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1 floordiv 2, d2 mod 16)>
// CHECK-LABEL: func.func @dense_bf16_pairs_odd_k
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$P3]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}}, %{{.*}} : tensor<7x9xf32>, tensor<1x5x16xf32>)
// CHECK: linalg.index 1 : index
// CHECK: arith.truncf
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @dense_bf16_pairs_odd_k(%x: tensor<7x9xf32>, %p: tensor<1x5x16xf32>,
                                  %init: tensor<7x16xf32>) -> tensor<7x16xf32> {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x5x16xf32> -> tensor<9x16xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<7x9xf32>, tensor<9x16xf32>) outs(%init : tensor<7x16xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %b, %a : f32
    %s = arith.addf %m, %acc : f32
    linalg.yield %s : f32
  } -> tensor<7x16xf32>
  return %y : tensor<7x16xf32>
}

// -----

// A dense MLP (single-expert expert_ffn) with both kernels in bf16 pair
// panels: the two expert matmuls the lowering builds read the pairs, the
// expert dim leading.
// CHECK: #[[$PE:.*]] = affine_map<(d0, d1, d2, d3, d4) -> (d0, d4 floordiv 16, d3 floordiv 2, d4 mod 16)>
// CHECK-LABEL: func.func @dense_mlp_bf16_pairs
// CHECK-NOT: vmoe.unpack_panels
// Its hidden is rounded to bf16 by the second matmul, so the GELU between
// them takes the logistic form v * 1 / (1 + 2^t) (buildActivation with
// roundedToBF16): t clamped, split by the 1.5 * 2^23 rounding shift, 2^f
// a degree-5 polynomial, 2^n from the shifted sum's bits; no math.tanh.
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$PE]], #{{.*}}]{{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x32xf32>, tensor<1x3x16x16xf32>)
// CHECK: arith.truncf
// CHECK: linalg.generic
// CHECK-NOT: math.tanh
// CHECK: arith.cmpf ogt
// CHECK: arith.select
// CHECK: arith.cmpf olt
// CHECK: arith.select
// CHECK: %[[SHIFTED:.*]] = arith.addf %{{.*}}, %cst{{.*}} : f32
// CHECK: %[[N:.*]] = arith.subf %[[SHIFTED]], %cst{{.*}} : f32
// CHECK-COUNT-5: math.fma
// CHECK: %[[BITS:.*]] = arith.bitcast %[[SHIFTED]] : f32 to i32
// CHECK: %[[BIASED:.*]] = arith.addi %[[BITS]], %{{.*}} : i32
// CHECK: %[[EXP:.*]] = arith.shli %[[BIASED]], %{{.*}} : i32
// CHECK: arith.bitcast %[[EXP]] : i32 to f32
// CHECK: arith.divf
// CHECK-NOT: math.tanh
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$PE]], #{{.*}}]{{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x48xf32>, tensor<1x2x24x16xf32>)
// CHECK: arith.truncf
// With bf16-dot (the target rounds to bf16 in one instruction) the hidden
// only feeds the second matmul, which multiplies it rounded to bf16: the
// bias and GELU between them write a new bf16 tensor (ending in the
// rounding), and the second matmul widens its elements (extf, no truncf).
// DOT-LABEL: func.func @dense_mlp_bf16_pairs
// DOT: %[[H:.*]] = linalg.generic {indexing_maps = [#{{.*}}, #{{.*}}, #{{.*}}]{{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x32xf32>, tensor<1x3x16x16xf32>)
// DOT: arith.truncf
// DOT: %[[HB:.*]] = tensor.empty() : tensor<1x1x8x48xbf16>
// DOT: linalg.generic
// DOT-SAME: ins(%[[H]], %{{.*}} : tensor<1x1x8x48xf32>, tensor<1x48xf32>) outs(%[[HB]] : tensor<1x1x8x48xbf16>)
// DOT-NOT: math.tanh
// DOT: arith.divf
// DOT: %[[R:.*]] = arith.mulf
// DOT-NEXT: %[[RB:.*]] = arith.truncf %[[R]] : f32 to bf16
// DOT-NEXT: linalg.yield %[[RB]] : bf16
// DOT: linalg.generic {{.*}}ins(%{{.*}}, %{{.*}} : tensor<1x1x8x48xbf16>, tensor<1x2x24x16xf32>)
// DOT: ^bb0(%[[HIN:.*]]: bf16, %{{.*}}: f32, %{{.*}}: f32):
// DOT-NOT: arith.truncf
// DOT: arith.extf %[[HIN]] : bf16 to f32
// DOT-NOT: arith.truncf
// DOT: linalg.yield %{{.*}} : f32
func.func @dense_mlp_bf16_pairs(%x: tensor<1x1x8x32xf32>, %p1: tensor<1x3x16x16xf32>, %b1: tensor<1x48xf32>,
                                %p2: tensor<1x2x24x16xf32>, %b2: tensor<1x32xf32>) -> tensor<1x1x8x32xf32> {
  %w1 = vmoe.unpack_panels %p1 {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x3x16x16xf32> -> tensor<1x32x48xf32>
  %w2 = vmoe.unpack_panels %p2 {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<1x2x24x16xf32> -> tensor<1x48x32xf32>
  %y = vmoe.expert_ffn %x, %w1, %b1, %w2, %b2
      : tensor<1x1x8x32xf32>, tensor<1x32x48xf32>, tensor<1x48xf32>, tensor<1x48x32xf32>, tensor<1x32xf32>
  return %y : tensor<1x1x8x32xf32>
}

// -----

// f32 panels are unchanged by the bf16 fold: plain panel map, the body
// still the plain multiply-add (no rounding, no index).
// CHECK: #[[$F:.*]] = affine_map<(d0, d1, d2) -> (d2 floordiv 16, d1, d2 mod 16)>
// CHECK-LABEL: func.func @negative_f32_panels_keep_body
// CHECK: linalg.generic {indexing_maps = [#{{.*}}, #[[$F]], #{{.*}}]
// CHECK-NOT: linalg.index
// CHECK-NOT: arith.truncf
// CHECK: arith.mulf
// CHECK-NEXT: arith.addf
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @negative_f32_panels_keep_body(%x: tensor<8x32xf32>, %p: tensor<3x32x16xf32>,
                                         %init: tensor<8x48xf32>) -> tensor<8x48xf32> {
  %w = vmoe.unpack_panels %p : tensor<3x32x16xf32> -> tensor<32x48xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %w : tensor<8x32xf32>, tensor<32x48xf32>) outs(%init : tensor<8x48xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<8x48xf32>
  return %y : tensor<8x48xf32>
}

// -----

/// What the bf16 fold leaves alone, each keeping the widening copy of the
/// pairs to the plain f32 layout (word [n floordiv 16, k floordiv 2,
/// n mod 16]): the unpacked kernel read as A (rows, not the output's
/// columns) and a contraction whose body is not a plain multiply-add (a
/// scaled product would lose its scale).
// CHECK: #[[$COPY:.*]] = affine_map<(d0, d1) -> (d1 floordiv 16, d0 floordiv 2, d1 mod 16)>
// CHECK-LABEL: func.func @negative_bf16_pairs_left_alone
// CHECK: linalg.generic {indexing_maps = [#[[$COPY]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}} : tensor<2x16x16xf32>)
// CHECK-NOT: arith.truncf
// CHECK: ins(%{{.*}}, %{{.*}} : tensor<32x32xf32>, tensor<32x8xf32>)
// CHECK: linalg.generic {indexing_maps = [#[[$COPY]], #{{.*}}]
// CHECK-SAME: ins(%{{.*}} : tensor<3x16x16xf32>)
// CHECK-NOT: arith.truncf
// CHECK: ins(%{{.*}}, %{{.*}} : tensor<4x32xf32>, tensor<32x48xf32>)
// CHECK-NOT: arith.truncf
// CHECK: return
// WIDE-LABEL: func.func @negative_bf16_pairs_left_alone
// WIDE-NOT: arith.truncf
// WIDE: return
#mk = affine_map<(m, k, n) -> (m, k)>
#kn = affine_map<(m, k, n) -> (k, n)>
#mn = affine_map<(m, k, n) -> (m, n)>
func.func @negative_bf16_pairs_left_alone(%p: tensor<2x16x16xf32>, %b: tensor<32x8xf32>, %i1: tensor<32x8xf32>,
                                          %x: tensor<4x32xf32>, %q: tensor<3x16x16xf32>, %i2: tensor<4x48xf32>)
    -> (tensor<32x8xf32>, tensor<4x48xf32>) {
  %w = vmoe.unpack_panels %p {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<2x16x16xf32> -> tensor<32x32xf32>
  %y = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%w, %b : tensor<32x32xf32>, tensor<32x8xf32>) outs(%i1 : tensor<32x8xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %s = arith.addf %acc, %m : f32
    linalg.yield %s : f32
  } -> tensor<32x8xf32>
  %v = vmoe.unpack_panels %q {storage = #vmoe.panel_storage<bf16_pairs>} : tensor<3x16x16xf32> -> tensor<32x48xf32>
  %u = linalg.generic {indexing_maps = [#mk, #kn, #mn], iterator_types = ["parallel", "reduction", "parallel"]}
      ins(%x, %v : tensor<4x32xf32>, tensor<32x48xf32>) outs(%i2 : tensor<4x48xf32>) {
  ^bb0(%a: f32, %c: f32, %acc: f32):
    %m = arith.mulf %a, %c : f32
    %two = arith.constant 2.0 : f32
    %m2 = arith.mulf %m, %two : f32
    %s = arith.addf %acc, %m2 : f32
    linalg.yield %s : f32
  } -> tensor<4x48xf32>
  return %y, %u : tensor<32x8xf32>, tensor<4x48xf32>
}
