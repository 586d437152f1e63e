// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-map-parallel-loops | FileCheck %s
// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-map-parallel-loops -canonicalize -cse | FileCheck %s --check-prefix=FOLD
// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-map-parallel-loops="threads-per-block=128 max-blocks=64" -canonicalize | FileCheck %s --check-prefix=CAP

// A 3 x 100000 loop: both dims are mapped (300000 iterations over
// ceil(300000 / 256) = 1172 blocks of 256 threads); grid y and z stay 1,
// although one dim is past the 65,535 limit of grid y/z. The last dim
// varies fastest across threads.
// CHECK-LABEL: func.func @past_grid_yz_limit
// CHECK: %[[N0:.*]] = arith.maxsi
// CHECK: %[[N1:.*]] = arith.maxsi
// CHECK: gpu.launch blocks(%[[BX:.*]], %{{.*}}, %{{.*}}) in (%[[GX:.*]] = %{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}}) threads(%[[TX:.*]], %{{.*}}, %{{.*}}) in (%{{.*}} = %c256{{.*}}, %{{.*}} = %c1{{.*}}, %{{.*}} = %c1{{.*}})
// CHECK:   scf.for %[[L:.*]] =
// CHECK:     %[[J:.*]] = arith.remui %[[L]], %[[N1]]
// CHECK:     %[[I:.*]] = arith.divui %[[L]], %[[N1]]
// CHECK:     memref.store {{.*}}[%{{.*}}, %{{.*}}]
// CHECK:   gpu.terminator
// CHECK-NOT: scf.parallel
// FOLD-LABEL: func.func @past_grid_yz_limit
// FOLD-DAG: %[[C1172:.*]] = arith.constant 1172 : index
// FOLD-DAG: %[[C300000:.*]] = arith.constant 300000 : index
// FOLD: gpu.launch blocks({{.*}}) in ({{.*}} = %[[C1172]], {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c256, {{.*}} = %c1, {{.*}} = %c1)
// FOLD:   scf.for %{{.*}} = %{{.*}} to %[[C300000]] step
// CAP-LABEL: func.func @past_grid_yz_limit
// CAP: gpu.launch blocks({{.*}}) in ({{.*}} = %c64, {{.*}} = %c1, {{.*}} = %c1) threads({{.*}}) in ({{.*}} = %c128,
func.func @past_grid_yz_limit(%out: memref<3x100000xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c3 = arith.constant 3 : index
  %cn = arith.constant 100000 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i, %j) = (%c0, %c0) to (%c3, %cn) step (%c1, %c1) {
    memref.store %one, %out[%i, %j] : memref<3x100000xf32>
    scf.reduce
  }
  return
}

// -----

// Dynamic bounds, a lower bound and a step: the trip count is computed on
// the host; a nested parallel loop stays in the thread.
// CHECK-LABEL: func.func @dynamic_nested
// CHECK: %[[SPAN:.*]] = arith.subi %arg1, %c2
// CHECK: arith.ceildivsi %[[SPAN]], %c3
// CHECK: gpu.launch
// CHECK:   scf.for
// CHECK:     %[[M:.*]] = arith.muli %{{.*}}, %c3
// CHECK:     %[[IV:.*]] = arith.addi %c2{{.*}}, %[[M]]
// CHECK:     scf.parallel
// CHECK:       memref.store %{{.*}}, %arg0[%[[IV]], %{{.*}}]
func.func @dynamic_nested(%out: memref<?x4xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c3 = arith.constant 3 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c2) to (%n) step (%c3) {
    scf.parallel (%j) = (%c0) to (%c4) step (%c1) {
      memref.store %one, %out[%i, %j] : memref<?x4xf32>
      scf.reduce
    }
    scf.reduce
  }
  return
}

// -----

// Loops already inside a kernel are left alone.
// CHECK-LABEL: func.func @inside_kernel
// CHECK: gpu.launch
// CHECK-NOT: gpu.launch
// CHECK: scf.parallel
func.func @inside_kernel(%out: memref<4xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
    scf.parallel (%i) = (%c0) to (%c4) step (%c1) {
      memref.store %one, %out[%i] : memref<4xf32>
      scf.reduce
    }
    gpu.terminator
  }
  return
}

// -----

// A sequential host loop that touches memory runs in a one-thread kernel.
// CHECK-LABEL: func.func @sequential_nest
// CHECK: gpu.launch blocks({{.*}}) in ({{.*}} = %[[ONE:.*]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]]) threads({{.*}}) in ({{.*}} = %[[ONE]], {{.*}} = %[[ONE]], {{.*}} = %[[ONE]])
// CHECK-NEXT: scf.for
// CHECK:   memref.load
// CHECK:   memref.store
// CHECK: gpu.terminator
// CHECK-NEXT: }
// CHECK-NEXT: return
func.func @sequential_nest(%m: memref<4xi32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  scf.for %i = %c1 to %c4 step %c1 {
    %p = arith.subi %i, %c1 : index
    %v = memref.load %m[%p] : memref<4xi32>
    memref.store %v, %m[%i] : memref<4xi32>
  }
  return
}

// -----

// So does a lone store (the fill of a 0-d buffer).
// CHECK-LABEL: func.func @lone_store
// CHECK: gpu.launch
// CHECK-NEXT: memref.store %{{.*}}, %arg0[] : memref<i32>
// CHECK-NEXT: gpu.terminator
func.func @lone_store(%m: memref<i32>) {
  %z = arith.constant 0 : i32
  memref.store %z, %m[] : memref<i32>
  return
}
