// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-map-parallel-loops -verify-diagnostics
// RUN: not vmoe-opt %s -split-input-file -vmoe-gpu-map-parallel-loops="threads-per-block=2048" 2>&1 | FileCheck %s --check-prefix=OPTION

// OPTION: vmoe-gpu-map-parallel-loops: threads-per-block must be in [1, 1024], got 2048

func.func @reduction(%in: memref<8xf32>) -> f32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %zero = arith.constant 0.0 : f32
  // expected-error @+1 {{'scf.parallel' op with reductions has no GPU mapping}}
  %sum = scf.parallel (%i) = (%c0) to (%c8) step (%c1) init (%zero) -> f32 {
    %v = memref.load %in[%i] : memref<8xf32>
    scf.reduce(%v : f32) {
    ^bb0(%a: f32, %b: f32):
      %s = arith.addf %a, %b : f32
      scf.reduce.return %s : f32
    }
  }
  return %sum : f32
}

// -----

func.func @host_loop_with_results(%m: memref<4xi32>) -> i32 {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c4 = arith.constant 4 : index
  %z = arith.constant 0 : i32
  // expected-error @+1 {{'scf.for' op in host code reads memory and has results: it cannot move into a GPU kernel}}
  %s = scf.for %i = %c0 to %c4 step %c1 iter_args(%a = %z) -> i32 {
    %v = memref.load %m[%i] : memref<4xi32>
    %n = arith.addi %a, %v : i32
    scf.yield %n : i32
  }
  return %s : i32
}
