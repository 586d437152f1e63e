// RUN: vmoe-opt %s -vmoe-vectorize-contractions="parallel=true" \
// RUN:   -verify-diagnostics
// RUN: vmoe-opt %s -vmoe-vectorize-contractions | FileCheck %s

/// With `parallel`, pair GEMMs ask the OpenMP runtime for its thread count:
/// a symbol of that name with another type is an error, not a miscompile.
/// Without `parallel`, nothing calls it and the module is left alone.
// CHECK: func.func private @omp_get_max_threads() -> i64
// expected-error @+1 {{omp_get_max_threads must be the OpenMP runtime's () -> i32}}
func.func private @omp_get_max_threads() -> i64
