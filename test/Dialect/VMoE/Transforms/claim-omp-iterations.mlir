// RUN: vmoe-opt %s --vmoe-claim-omp-iterations --split-input-file | FileCheck %s

// A dynamic loop that is all its region does: every thread claims the next
// iteration from a counter zeroed before the region; no omp.wsloop left.
// CHECK-LABEL: func.func @blocks
// CHECK-SAME: (%[[OUT:.*]]: memref<?xf32>, %[[N:.*]]: index)
// CHECK: %[[CTR:.*]] = memref.alloca() : memref<i64>
// CHECK: memref.store %{{.*}}, %[[CTR]][] : memref<i64>
// CHECK: omp.parallel {
// CHECK-NEXT: cf.br ^[[CLAIM:bb[0-9]+]]
// CHECK: ^[[CLAIM]]:
// CHECK: %[[OLD:.*]] = memref.atomic_rmw addi %{{.*}}, %[[CTR]][] : (i64, memref<i64>) -> i64
// CHECK: %[[I:.*]] = arith.index_cast %[[OLD]] : i64 to index
// CHECK: %[[MORE:.*]] = arith.cmpi slt, %[[I]], %{{.*}} : index
// CHECK: cf.cond_br %[[MORE]], ^[[BODY:bb[0-9]+]], ^[[EXIT:bb[0-9]+]]
// CHECK: ^[[BODY]]:
// CHECK: %[[SCALED:.*]] = arith.muli %[[I]], %{{.*}} : index
// CHECK: %[[IV:.*]] = arith.addi %[[SCALED]], %{{.*}} : index
// CHECK: memref.store %{{.*}}, %[[OUT]][%[[IV]]]
// CHECK: cf.br ^[[CLAIM]]
// CHECK: ^[[EXIT]]:
// CHECK-NEXT: omp.terminator
// CHECK-NOT: omp.wsloop
func.func @blocks(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %one, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A collapsed nest: the claimed number is taken apart, the last dim
// fastest; the count is the product of both dims' trip counts.
// CHECK-LABEL: func.func @collapsed
// CHECK: %[[ROWS:.*]] = arith.maxsi
// CHECK: %[[COLS:.*]] = arith.maxsi
// CHECK: %[[TOTAL:.*]] = arith.muli %[[ROWS]], %[[COLS]] : index
// CHECK: omp.parallel {
// CHECK: %[[I:.*]] = arith.index_cast
// CHECK: arith.cmpi slt, %[[I]], %[[TOTAL]] : index
// CHECK: %[[COL:.*]] = arith.remsi %[[I]], %[[COLS]] : index
// CHECK: %[[ROW:.*]] = arith.divsi %[[I]], %[[COLS]] : index
// CHECK: %[[J:.*]] = arith.muli %[[COL]], %{{.*}} : index
// CHECK: %[[COLIV:.*]] = arith.addi %[[J]], %{{.*}} : index
// CHECK: %[[R:.*]] = arith.muli %[[ROW]], %{{.*}} : index
// CHECK: %[[ROWIV:.*]] = arith.addi %[[R]], %{{.*}} : index
// CHECK: memref.store %{{.*}}[%[[ROWIV]], %[[COLIV]]] : memref<?x?xf32>
// CHECK-NOT: omp.wsloop
func.func @collapsed(%out: memref<?x?xf32>, %m: index, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i, %j) : index = (%c0, %c0) to (%m, %n) step (%c1, %c2) {
        memref.store %one, %out[%i, %j] : memref<?x?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// Left to libomp: a static schedule, a chunk size, a reduction's partial
// sums, a region that does more than the loop, a negative step.
// CHECK-LABEL: func.func @kept
// CHECK-NOT: memref.alloca
// CHECK-NOT: memref.atomic_rmw
// CHECK: omp.wsloop schedule(static)
// CHECK: omp.wsloop schedule(dynamic = %{{.*}} : i32)
// CHECK: omp.wsloop schedule(dynamic) reduction(
// CHECK: memref.store
// CHECK-NEXT: omp.wsloop schedule(dynamic)
// CHECK: omp.wsloop schedule(dynamic)
// CHECK-NEXT: omp.loop_nest (%{{.*}}) : index = (%{{.*}}) to (%{{.*}}) step (%[[CM1:.*]])
// CHECK-NOT: memref.atomic_rmw
omp.declare_reduction @add_f32 : f32
init {
^bb0(%arg: f32):
  %0 = arith.constant 0.0 : f32
  omp.yield (%0 : f32)
}
combiner {
^bb1(%a: f32, %b: f32):
  %1 = arith.addf %a, %b : f32
  omp.yield (%1 : f32)
}
func.func @kept(%out: memref<?xf32>, %n: index, %sum: memref<f32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : i32
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(static) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %one, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    omp.wsloop schedule(dynamic = %c4 : i32) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %one, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %acc = llvm.alloca %c4 x f32 : (i32) -> !llvm.ptr
  omp.parallel {
    omp.wsloop schedule(dynamic) reduction(@add_f32 %acc -> %prv : !llvm.ptr) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %v = memref.load %out[%i] : memref<?xf32>
        %p = llvm.load %prv : !llvm.ptr -> f32
        %s = arith.addf %p, %v : f32
        llvm.store %s, %prv : f32, !llvm.ptr
        omp.yield
      }
    }
    omp.terminator
  }
  omp.parallel {
    memref.store %one, %sum[] : memref<f32>
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        memref.store %one, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  %cm1 = arith.constant -1 : index
  omp.parallel {
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i) : index = (%n) to (%c0) step (%cm1) {
        memref.store %one, %out[%i] : memref<?xf32>
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// -----

// A region nested in another runs on every outer thread at once, each
// needing its own counter: the inner loop is left to libomp, the outer one
// claimed.
// CHECK-LABEL: func.func @nested
// CHECK: %[[CTR:.*]] = memref.alloca() : memref<i64>
// CHECK-NOT: memref.alloca
// CHECK: omp.parallel {
// CHECK: memref.atomic_rmw addi %{{.*}}, %[[CTR]][]
// CHECK-NOT: memref.atomic_rmw
// CHECK: omp.parallel {
// CHECK-NEXT: omp.wsloop schedule(dynamic) {
func.func @nested(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(dynamic) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        omp.parallel {
          omp.wsloop schedule(dynamic) {
            omp.loop_nest (%j) : index = (%c0) to (%n) step (%c1) {
              memref.store %one, %out[%j] : memref<?xf32>
              omp.yield
            }
          }
          omp.terminator
        }
        omp.yield
      }
    }
    omp.terminator
  }
  return
}
