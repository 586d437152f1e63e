// RUN: vmoe-opt %s -split-input-file -canonicalize | FileCheck %s

// vmoe.capacity folds when the ratio is a constant: round(2*400*1.05/32) =
// round(26.25) = 26.
// CHECK-LABEL: func.func @capacity_constant_ratio
// CHECK-NOT: vmoe.capacity
// CHECK: %[[B:.*]] = arith.constant 26 : index
// CHECK: return %[[B]]
func.func @capacity_constant_ratio() -> index {
  %c = arith.constant 1.05 : f64
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                         max_capacity = 42 : i64} : f64
  return %b : index
}

// -----

// Ties go to even: 2*50*1.0/8 = 12.5 -> 12.
// CHECK-LABEL: func.func @capacity_ties_to_even
// CHECK: arith.constant 12 : index
func.func @capacity_ties_to_even() -> index {
  %c = arith.constant 1.0 : f64
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 8 : i64, tokens_per_group = 50 : i64,
                         max_capacity = 100 : i64} : f64
  return %b : index
}

// -----

// ceil, then a multiple of 4: 2*32*1.0/32 = 2 -> 4.
// CHECK-LABEL: func.func @capacity_ceil_multiple_of
// CHECK: arith.constant 4 : index
func.func @capacity_ceil_multiple_of() -> index {
  %c = arith.constant 1.0 : f64
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 32 : i64,
                         max_capacity = 100 : i64, capacity_rule = #vmoe.capacity_rule<ceil>,
                         multiple_of = 4 : i64} : f64
  return %b : index
}

// -----

// The static maximum clamps: round(2*400*2.0/32) = 50 -> 26.
// CHECK-LABEL: func.func @capacity_clamped_to_max
// CHECK: arith.constant 26 : index
func.func @capacity_clamped_to_max() -> index {
  %c = arith.constant 2.0 : f64
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                         max_capacity = 26 : i64} : f64
  return %b : index
}

// -----

// A ratio that rounds to 0 folds to 0 (every choice is dropped). A constant
// NaN or negative ratio is a verifier error (capacity-C2,
// invalid-limits.mlir), no longer folded to 0.
// CHECK-LABEL: func.func @capacity_tiny_ratio
// CHECK: %[[ZERO:.*]] = arith.constant 0 : index
// CHECK: return %[[ZERO]]
func.func @capacity_tiny_ratio() -> index {
  %tiny = arith.constant 0.001 : f64
  %b0 = vmoe.capacity %tiny {k = 1 : i64, num_experts = 32 : i64, tokens_per_group = 50 : i64,
                             max_capacity = 8 : i64} : f64
  return %b0 : index
}

// -----

/// A runtime ratio stays.
// CHECK-LABEL: func.func @negative_capacity_runtime_ratio
// CHECK: vmoe.capacity %{{.*}}
func.func @negative_capacity_runtime_ratio(%c: f64) -> index {
  %b = vmoe.capacity %c {k = 2 : i64, num_experts = 32 : i64, tokens_per_group = 400 : i64,
                         max_capacity = 26 : i64} : f64
  return %b : index
}
