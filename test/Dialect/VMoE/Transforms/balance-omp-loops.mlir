// RUN: vmoe-opt %s --convert-scf-to-openmp --vmoe-balance-omp-loops | FileCheck %s

// Reduction-free parallel loops (one writer per output) are taken
// dynamically.
// CHECK-LABEL: func.func @blocks
// CHECK: omp.wsloop schedule(dynamic) {
func.func @blocks(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    memref.store %one, %out[%i] : memref<?xf32>
    scf.reduce
  }
  return
}

// A reduction keeps the static split: its rounding would otherwise depend
// on which thread took which iteration.
// CHECK-LABEL: func.func @sum
// CHECK: omp.wsloop reduction(
// CHECK-NOT: schedule
// CHECK: omp.loop_nest
func.func @sum(%in: memref<?xf32>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %v = memref.load %in[%i] : memref<?xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %r = arith.addf %a, %b : f32
      scf.reduce.return %r : f32
    }
  }
  return %s : f32
}

// A loop that has a schedule keeps it.
// CHECK-LABEL: func.func @scheduled
// CHECK: omp.wsloop schedule(static) {
func.func @scheduled(%out: memref<?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
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
  return
}
