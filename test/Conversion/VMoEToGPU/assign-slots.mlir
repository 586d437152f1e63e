// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-gpu | FileCheck %s

// assign_slots with BPR order, runtime capacity and num_valid: slots filled
// with -1, then one launch of 4 warps of 32 lanes per block, one warp per
// (group, expert) numbered on grid x (capped at 65,535, warp-stride loop).
// A warp walks the entries 32 at a time while its expert has room: the
// token through the clamped order, the lane's vote, the rank from the
// population count of the ballot below the lane; kept entries write their
// slot and slot entry. Then lane 0 writes fill and the lanes -1 past it.
// CHECK-LABEL: func.func @assign_slots_bpr_runtime_valid
// CHECK-SAME: (%[[IDS:.*]]: tensor<1x40x2xi32>, %[[ORDER:.*]]: tensor<1x40xi32>, %[[CAP:.*]]: index, %[[VALID:.*]]: index)
// CHECK-DAG: %[[IDSB:.*]] = bufferization.to_buffer %[[IDS]] read_only
// CHECK-DAG: %[[ORDERB:.*]] = bufferization.to_buffer %[[ORDER]] read_only
// CHECK: %[[MIN:.*]] = arith.minsi %[[CAP]], %c7
// CHECK: %[[LIMIT:.*]] = arith.maxsi %[[MIN]], %c0
// CHECK: %[[SLOTS:.*]] = memref.alloc() : memref<1x40x2xi32>
// CHECK: linalg.fill ins(%c-1_i32 : i32) outs(%[[SLOTS]] : memref<1x40x2xi32>)
// CHECK: %[[ENTRIES:.*]] = memref.alloc() : memref<6x1x7xi32>
// CHECK: %[[FILL:.*]] = memref.alloc() : memref<6x1xi32>
// CHECK: %[[WARPS:.*]] = arith.muli %c1{{.*}}, %c6
// CHECK: %[[BLOCKS:.*]] = arith.ceildivui %[[WARPS]], %c4
// CHECK: arith.minui %[[BLOCKS]], %c65535
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[LANE:.*]], %[[WARP:.*]], %{{.*}}) in (%{{.*}} = %c32, %{{.*}} = %c4, %{{.*}} = %c1{{.*}}) {
// CHECK:   %[[FIRST0:.*]] = arith.muli %[[BX]], %c4
// CHECK:   %[[FIRST:.*]] = arith.addi %[[FIRST0]], %[[WARP]]
// CHECK:   %[[STRIDE:.*]] = arith.muli %[[GX]], %c4
// CHECK:   scf.for %[[W:.*]] = %[[FIRST]] to %[[WARPS]] step %[[STRIDE]] {
// CHECK:     %[[G:.*]] = arith.divui %[[W]], %c6
// CHECK:     %[[E:.*]] = arith.remui %[[W]], %c6
// CHECK:     %[[COUNT:.*]]:3 = scf.while
// CHECK:       arith.cmpi slt, %{{.*}}, %[[LIMIT]]
// CHECK:       scf.condition
// CHECK:     } do {
// CHECK:       %[[O:.*]] = memref.load %[[ORDERB]][%[[G]], %{{.*}}]
// CHECK:       %[[OI:.*]] = arith.index_cast %[[O]] : i32 to index
// CHECK:       %[[OMIN:.*]] = arith.minsi %[[OI]], %{{.*}}
// CHECK:       %[[T:.*]] = arith.maxsi %[[OMIN]], %{{.*}}
// CHECK:       %[[ID:.*]] = memref.load %[[IDSB]][%[[G]], %[[T]], %{{.*}}]
// CHECK:       arith.cmpi eq, %[[ID]], %{{.*}} : i32
// CHECK:       %[[POS0:.*]] = arith.muli %[[G]], %c40
// CHECK:       %[[POS:.*]] = arith.addi %[[POS0]], %[[T]]
// CHECK:       %[[UNMASKED:.*]] = arith.cmpi slt, %[[POS]], %[[VALID]]
// CHECK:       %[[MINE:.*]] = arith.andi %{{.*}}, %[[UNMASKED]]
// CHECK:       %[[BALLOT:.*]] = nvvm.vote.sync ballot %c-1_i32{{.*}}, %[[MINE]] -> i32
// CHECK:       %[[BELOW:.*]] = arith.andi %[[BALLOT]], %{{.*}} : i32
// CHECK:       %[[POP:.*]] = llvm.intr.ctpop(%[[BELOW]]) : (i32) -> i32
// CHECK:       %[[POPI:.*]] = arith.index_castui %[[POP]] : i32 to index
// CHECK:       %[[RANK:.*]] = arith.addi %{{.*}}, %[[POPI]]
// CHECK:       %[[ROOM:.*]] = arith.cmpi slt, %[[RANK]], %[[LIMIT]]
// CHECK:       %[[KEPT:.*]] = arith.andi %[[MINE]], %[[ROOM]]
// CHECK:       scf.if %[[KEPT]] {
// CHECK:         memref.store %{{.*}}, %[[SLOTS]][%[[G]], %[[T]], %{{.*}}]
// CHECK:         memref.store %{{.*}}, %[[ENTRIES]][%[[E]], %[[G]], %[[RANK]]]
// CHECK:       }
// CHECK:       llvm.intr.ctpop(%[[BALLOT]])
// CHECK:       scf.yield
// CHECK:     %[[FILLED:.*]] = arith.minsi %[[COUNT]]#2, %[[LIMIT]]
// CHECK:     %[[LANE0:.*]] = arith.cmpi eq, %[[LANE]], %c0
// CHECK:     scf.if %[[LANE0]] {
// CHECK:       memref.store %{{.*}}, %[[FILL]][%[[E]], %[[G]]]
// CHECK:     %[[FROM:.*]] = arith.addi %[[FILLED]], %[[LANE]]
// CHECK:     scf.for %[[R:.*]] = %[[FROM]] to %c7 step %c32
// CHECK:       memref.store %c-1_i32{{.*}}, %[[ENTRIES]][%[[E]], %[[G]], %[[R]]]
// CHECK:   gpu.terminator
// CHECK: bufferization.to_tensor %[[SLOTS]] restrict writable
// CHECK: bufferization.to_tensor %[[ENTRIES]] restrict writable
// CHECK: bufferization.to_tensor %[[FILL]] restrict writable
// CHECK-NOT: vmoe.assign_slots
func.func @assign_slots_bpr_runtime_valid(%ids: tensor<1x40x2xi32>, %order: tensor<1x40xi32>,
    %c: index, %n: index) -> (tensor<1x40x2xi32>, tensor<6x1x7xi32>, tensor<6x1xi32>) {
  %s, %e, %f = vmoe.assign_slots %ids, %order capacity(%c) valid(%n)
      : tensor<1x40x2xi32>, tensor<1x40xi32>
      -> tensor<1x40x2xi32>, tensor<6x1x7xi32>, tensor<6x1xi32>
  return %s, %e, %f : tensor<1x40x2xi32>, tensor<6x1x7xi32>, tensor<6x1xi32>
}

// -----

// Token order (no order operand, no clamp), the static capacity as the
// limit, no num_valid mask; G and S dynamic: the buffers take them from
// expert_ids, the warps are G * E.
// CHECK-LABEL: func.func @assign_slots_token_order_dynamic
// CHECK-SAME: (%[[IDS:.*]]: tensor<?x?x2xi32>)
// CHECK: %[[IDSB:.*]] = bufferization.to_buffer %[[IDS]] read_only
// CHECK: %[[G:.*]] = tensor.dim %[[IDS]], %c0
// CHECK: %[[S:.*]] = tensor.dim %[[IDS]], %c1
// CHECK-NOT: arith.minsi
// CHECK: %[[SLOTS:.*]] = memref.alloc(%[[G]], %[[S]]) : memref<?x?x2xi32>
// CHECK: linalg.fill ins(%c-1_i32 : i32) outs(%[[SLOTS]] : memref<?x?x2xi32>)
// CHECK: memref.alloc(%[[G]]) : memref<5x?x3xi32>
// CHECK: memref.alloc(%[[G]]) : memref<5x?xi32>
// CHECK: %[[WARPS:.*]] = arith.muli %[[G]], %c5
// CHECK: gpu.launch
// CHECK:   scf.for %{{.*}} = %{{.*}} to %[[WARPS]]
// CHECK:     scf.while
// CHECK:       arith.cmpi slt, %{{.*}}, %c3
// CHECK:     } do {
// CHECK:       %[[AT:.*]] = arith.select
// CHECK-NEXT:  %[[ID:.*]] = memref.load %[[IDSB]][%{{.*}}, %[[AT]], %{{.*}}]
// CHECK-NEXT:  %[[EQ:.*]] = arith.cmpi eq, %[[ID]], %{{.*}} : i32
// CHECK-NEXT:  %[[MINE:.*]] = arith.andi %{{.*}}, %[[EQ]] : i1
// CHECK:       nvvm.vote.sync ballot %{{.*}}, %[[MINE]] -> i32
// CHECK: gpu.terminator
// CHECK-NOT: vmoe.assign_slots
func.func @assign_slots_token_order_dynamic(%ids: tensor<?x?x2xi32>)
    -> (tensor<?x?x2xi32>, tensor<5x?x3xi32>, tensor<5x?xi32>) {
  %s, %e, %f = vmoe.assign_slots %ids
      : tensor<?x?x2xi32> -> tensor<?x?x2xi32>, tensor<5x?x3xi32>, tensor<5x?xi32>
  return %s, %e, %f : tensor<?x?x2xi32>, tensor<5x?x3xi32>, tensor<5x?xi32>
}

// -----

/// An unfused dispatch (its buffers are returned, so vmoe-fuse-experts
/// leaves it) is left for convert-vmoe-to-scf, as are route and bpr_sort.
// CHECK-LABEL: func.func @negative_dispatch
// CHECK-NOT: gpu.launch
// CHECK: vmoe.dispatch
// CHECK-NOT: gpu.launch
func.func @negative_dispatch(%x: tensor<1x8x16xf32>, %ids: tensor<1x8x2xi32>, %o: tensor<1x8xi32>)
    -> (tensor<4x1x4x16xf32>, tensor<1x8x2xi32>) {
  %b, %s = vmoe.dispatch %x, %ids, %o {capacity = 4 : i64, capacity_ratio = 1.0 : f64}
      : tensor<1x8x16xf32>, tensor<1x8x2xi32>, tensor<1x8xi32> -> tensor<4x1x4x16xf32>, tensor<1x8x2xi32>
  return %b, %s : tensor<4x1x4x16xf32>, tensor<1x8x2xi32>
}
