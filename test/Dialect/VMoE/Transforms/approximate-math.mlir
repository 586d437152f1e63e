// RUN: vmoe-opt %s -split-input-file -vmoe-approximate-math | FileCheck %s

// tanh and exp, scalar and vector, become polynomial arithmetic.
// CHECK-LABEL: func.func @tanh_exp
// CHECK-NOT: math.tanh
// CHECK-NOT: math.exp
// CHECK: arith.mulf
// CHECK: return
func.func @tanh_exp(%x: f32, %v: vector<8xf32>) -> (f32, vector<8xf32>) {
  %t = math.tanh %x : f32
  %e = math.exp %v : vector<8xf32>
  return %t, %e : f32, vector<8xf32>
}

// -----

// CHECK-LABEL: func.func @erf
// CHECK-NOT: math.erf
func.func @erf(%x: vector<8xf32>) -> vector<8xf32> {
  %e = math.erf %x : vector<8xf32>
  return %e : vector<8xf32>
}

// -----

/// Exact ops stay.
// CHECK-LABEL: func.func @negative_sqrt
// CHECK: math.sqrt
func.func @negative_sqrt(%x: f32) -> f32 {
  %s = math.sqrt %x : f32
  return %s : f32
}
