// RUN: vmoe-opt %s --split-input-file --vmoe-streaming-stores | FileCheck %s
// RUN: vmoe-opt %s --split-input-file --vmoe-streaming-stores="lanes=8" \
// RUN:   | FileCheck %s --check-prefix=AVX2
// RUN: not vmoe-opt %s --vmoe-streaming-stores="lanes=12" 2>&1 \
// RUN:   | FileCheck %s --check-prefix=BAD
// BAD: vmoe-streaming-stores: lanes must be a power of two, got 12

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>

// A layer norm's normalize step, as the frontend marks it, on a chunk of
// rows (a subview, as vmoe-parallel-linalg leaves it): the runtime's flag
// and the output's alignment choose between vector loops with
// non-temporal stores and the op itself, which loses its mark.
// CHECK: memref.global @vmoe_streaming_stores : memref<i32>
// CHECK-LABEL: func.func @normalize
// CHECK: %[[G:.*]] = memref.get_global @vmoe_streaming_stores : memref<i32>
// CHECK: %[[FLAG:.*]] = memref.load %[[G]][] : memref<i32>
// CHECK: %[[ON:.*]] = arith.cmpi ne, %[[FLAG]], %{{.*}} : i32
// CHECK: %{{.*}}, %[[OFFSET:.*]], %{{.*}}:2, %{{.*}}:2 = memref.extract_strided_metadata %[[OUT:.*]] :
// CHECK: %[[P:.*]] = memref.extract_aligned_pointer_as_index %[[OUT]]
// CHECK: %[[BYTES:.*]] = arith.muli %[[OFFSET]], %{{.*}} : index
// CHECK: %[[ADDR:.*]] = arith.addi %[[P]], %[[BYTES]] : index
// CHECK: %[[REM:.*]] = arith.remui %[[ADDR]], %[[C64:.*]] : index
// CHECK: %[[ALIGNED:.*]] = arith.cmpi eq, %[[REM]], %{{.*}} : index
// CHECK: %[[BOTH:.*]] = arith.andi %[[ON]], %[[ALIGNED]] : i1
// CHECK: scf.if %[[BOTH]] {
// CHECK:   scf.for %[[R:.*]] = %{{.*}} to %{{.*}} step %{{.*}} {
// CHECK:     %[[MEAN:.*]] = memref.load %{{.*}}[%[[R]]] : memref<25xf32>
// CHECK:     %[[INV:.*]] = memref.load %{{.*}}[%[[R]]] : memref<25xf32>
// CHECK:     scf.for %[[C:.*]] = %{{.*}} to %{{.*}} step %[[C16:.*]] {
// CHECK:       %[[X:.*]] = vector.load %{{.*}}[%[[R]], %[[C]]] : memref<25x64xf32, strided<[64, 1], offset: ?>>, vector<16xf32>
// CHECK:       %[[M:.*]] = vector.broadcast %[[MEAN]] : f32 to vector<16xf32>
// CHECK:       %[[I:.*]] = vector.broadcast %[[INV]] : f32 to vector<16xf32>
// CHECK:       %[[S:.*]] = vector.load %{{.*}}[%[[C]]] : memref<64xf32, strided<[1], offset: ?>>, vector<16xf32>
// CHECK:       %[[B:.*]] = vector.load %{{.*}}[%[[C]]] : memref<64xf32>, vector<16xf32>
// CHECK:       %[[D:.*]] = arith.subf %[[X]], %[[M]] fastmath<contract> : vector<16xf32>
// CHECK:       %[[N:.*]] = arith.mulf %[[D]], %[[I]] : vector<16xf32>
// CHECK:       %[[Y:.*]] = arith.mulf %[[N]], %[[S]] : vector<16xf32>
// CHECK:       %[[Z:.*]] = arith.addf %[[Y]], %[[B]] : vector<16xf32>
// CHECK:       vector.store %[[Z]], %[[OUT]][%[[R]], %[[C]]] {alignment = 64 : i64, nontemporal = true}
// CHECK:   }
// CHECK: } else {
// CHECK:   linalg.generic
// CHECK-NOT: vmoe.streaming_stores
// CHECK:     arith.subf
// CHECK: }
// AVX2-LABEL: func.func @normalize
// AVX2: arith.remui %{{.*}}, %{{.*}} : index
// AVX2: vector.load %{{.*}} vector<8xf32>
// AVX2: vector.store %{{.*}} {alignment = 32 : i64, nontemporal = true} : memref<25x64xf32, strided<[64, 1], offset: ?>>, vector<8xf32>
func.func @normalize(%x: memref<25x64xf32, strided<[64, 1], offset: ?>>,
                     %mean: memref<25xf32>, %inv: memref<25xf32>,
                     %scale: memref<64xf32, strided<[1], offset: ?>>,
                     %bias: memref<64xf32>,
                     %out: memref<25x64xf32, strided<[64, 1], offset: ?>>) {
  linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %inv, %scale, %bias
          : memref<25x64xf32, strided<[64, 1], offset: ?>>, memref<25xf32>,
            memref<25xf32>, memref<64xf32, strided<[1], offset: ?>>,
            memref<64xf32>)
      outs(%out : memref<25x64xf32, strided<[64, 1], offset: ?>>)
      attrs = {vmoe.streaming_stores} {
  ^bb0(%a: f32, %m: f32, %i: f32, %s: f32, %b: f32, %o: f32):
    %0 = arith.subf %a, %m fastmath<contract> : f32
    %1 = arith.mulf %0, %i : f32
    %2 = arith.mulf %1, %s : f32
    %3 = arith.addf %2, %b : f32
    linalg.yield %3 : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>

// Unmarked ops are left alone, and no flag is declared.
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @unmarked
// CHECK-NOT: scf.if
// CHECK: linalg.generic
func.func @unmarked(%x: memref<8x64xf32>, %y: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x64xf32>) outs(%y : memref<8x64xf32>) {
  ^bb0(%a: f32, %b: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  }
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// Marked ops that do not fit are left alone and lose the mark: rows of 40
// floats (not a multiple of 16 lanes, nor of 64 bytes), a reduction, a
// transposed input.
// CHECK-NOT: memref.global
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT: scf.if
// CHECK-NOT: vector.store
// CHECK-NOT: vmoe.streaming_stores
func.func @left_alone(%x: memref<8x40xf32>, %y: memref<8x40xf32>,
                      %s: memref<8xf32>, %t: memref<64x8xf32>,
                      %u: memref<8x64xf32>) {
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x40xf32>) outs(%y : memref<8x40xf32>)
      attrs = {vmoe.streaming_stores} {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x40xf32>) outs(%s : memref<8xf32>)
      attrs = {vmoe.streaming_stores} {
  ^bb0(%a: f32, %b: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  }
  linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, d0)>, #id],
                  iterator_types = ["parallel", "parallel"]}
      ins(%t : memref<64x8xf32>) outs(%u : memref<8x64xf32>)
      attrs = {vmoe.streaming_stores} {
  ^bb0(%a: f32, %b: f32):
    linalg.yield %a : f32
  }
  return
}
