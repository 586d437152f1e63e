// RUN: vmoe-opt %s --convert-scf-to-openmp --vmoe-balance-omp-loops | FileCheck %s

// Iterations whose work depends on data they load (an expert's fill) are
// taken dynamically.
// CHECK-LABEL: func.func @fills
// CHECK: omp.wsloop schedule(dynamic) {
func.func @fills(%out: memref<?x?xf32>, %fill: memref<?xindex>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %rows = memref.load %fill[%i] : memref<?xindex>
    scf.for %r = %c0 to %rows step %c1 {
      memref.store %one, %out[%i, %r] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// So are iterations whose work depends on their index (a triangle).
// CHECK-LABEL: func.func @triangle
// CHECK: omp.wsloop schedule(dynamic) {
func.func @triangle(%out: memref<?x?xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    scf.for %r = %c0 to %i step %c1 {
      memref.store %one, %out[%i, %r] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// And iterations that branch on loaded data.
// CHECK-LABEL: func.func @branch
// CHECK: omp.wsloop schedule(dynamic) {
func.func @branch(%out: memref<?xf32>, %flags: memref<?xi1>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %flag = memref.load %flags[%i] : memref<?xi1>
    scf.if %flag {
      memref.store %one, %out[%i] : memref<?xf32>
    }
    scf.reduce
  }
  return
}

// Uniform iterations (bounds from constants and values defined above the
// loop, computed without reading memory: attention's images x heads) keep
// the static split, which gives each thread the same share of rows in
// every such loop.
// CHECK-LABEL: func.func @uniform
// CHECK: omp.wsloop {
func.func @uniform(%out: memref<?x?xf32>, %n: index, %m: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%n) step (%c1) {
    %half = arith.divui %m, %c2 : index
    scf.for %r = %c0 to %half step %c1 {
      memref.store %one, %out[%i, %r] : memref<?x?xf32>
    }
    %odd = arith.cmpi ugt, %m, %c1 : index
    scf.if %odd {
      memref.store %one, %out[%i, %c0] : memref<?x?xf32>
    }
    scf.reduce
  }
  return
}

// A loop over as many blocks as a multiple of the threads (a GEMM's
// balanced blocks, whose lengths differ by at most one tile) keeps the
// static split too.
// CHECK-LABEL: func.func @blocks
// CHECK: omp.wsloop {
func.func private @omp_get_max_threads() -> i32
func.func @blocks(%out: memref<?x?xf32>, %rows: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %one = arith.constant 1.0 : f32
  %t = func.call @omp_get_max_threads() : () -> i32
  %threads = arith.index_castui %t : i32 to index
  %blocks = arith.muli %threads, %c4 : index
  scf.parallel (%i) = (%c0) to (%blocks) step (%c1) {
    %begin = arith.muli %i, %rows : index
    %next = arith.addi %i, %c1 : index
    %end = arith.muli %next, %rows : index
    %b0 = arith.divui %begin, %blocks : index
    %b1 = arith.divui %end, %blocks : index
    scf.for %r = %b0 to %b1 step %c1 {
      memref.store %one, %out[%i, %r] : memref<?x?xf32>
    }
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
func.func @sum(%in: memref<?xf32>, %rows: memref<?xindex>, %n: index) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %zero = arith.constant 0.0 : f32
  %s = scf.parallel (%i) = (%c0) to (%n) step (%c1) init (%zero) -> f32 {
    %end = memref.load %rows[%i] : memref<?xindex>
    %p = scf.for %r = %c0 to %end step %c1 iter_args(%a = %zero) -> f32 {
      %v = memref.load %in[%r] : memref<?xf32>
      %b = arith.addf %a, %v : f32
      scf.yield %b : f32
    }
    scf.reduce(%p : f32) {
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
func.func @scheduled(%out: memref<?xf32>, %fill: memref<?xindex>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %one = arith.constant 1.0 : f32
  omp.parallel {
    omp.wsloop schedule(static) {
      omp.loop_nest (%i) : index = (%c0) to (%n) step (%c1) {
        %rows = memref.load %fill[%i] : memref<?xindex>
        scf.for %r = %c0 to %rows step %c1 {
          memref.store %one, %out[%r] : memref<?xf32>
        }
        omp.yield
      }
    }
    omp.terminator
  }
  return
}

// A long loop of a known count (routing over 400 tokens) keeps the static
// split, whatever its iterations: no atomic operation per iteration.
// CHECK-LABEL: func.func @tokens
// CHECK: omp.wsloop {
func.func @tokens(%out: memref<400x8xf32>, %fill: memref<400xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c400 = arith.constant 400 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c400) step (%c1) {
    %rows = memref.load %fill[%i] : memref<400xindex>
    scf.for %r = %c0 to %rows step %c1 {
      memref.store %one, %out[%i, %r] : memref<400x8xf32>
    }
    scf.reduce
  }
  return
}

// 16 chunks of 25 rows (vmoe-parallel-linalg) of unequal work are few:
// dynamic.
// CHECK-LABEL: func.func @chunks
// CHECK: omp.wsloop schedule(dynamic) {
func.func @chunks(%out: memref<400xf32>, %fill: memref<400xindex>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c25 = arith.constant 25 : index
  %c400 = arith.constant 400 : index
  %one = arith.constant 1.0 : f32
  scf.parallel (%i) = (%c0) to (%c400) step (%c25) {
    %rows = memref.load %fill[%i] : memref<400xindex>
    scf.for %r = %c0 to %rows step %c1 {
      memref.store %one, %out[%r] : memref<400xf32>
    }
    scf.reduce
  }
  return
}
