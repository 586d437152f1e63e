// RUN: vmoe-opt %s --vmoe-lower-to-cpu="parallel=false vector-width=16 bf16-dot=true" | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="parallel=true vector-width=16 bf16-dot=true" | FileCheck %s --check-prefix=OMP

// The five scratch buffers of a fused attention item (k's pairs, qᵀ's
// panels, the scores, the probabilities' pairs, v's panels: memref.alloca
// marked vmoe.stack_scratch in one loop body) share one stacksave before
// the first and one stackrestore at the end of the body, which frees them
// all every iteration; a pair per buffer would restore the first save and
// then the second, leaving all but the first on the stack.
// CHECK-LABEL: llvm.func @attention
// CHECK: llvm.intr.stacksave
// CHECK-NOT: llvm.intr.stacksave
// CHECK-COUNT-5: llvm.alloca %{{.*}} x {{i32|f32}} {alignment = 64 : i64}
// CHECK-NOT: llvm.intr.stacksave
// CHECK: llvm.intr.stackrestore
// CHECK-NOT: llvm.intr.stackrestore
// CHECK: llvm.return

// With OpenMP threads the body is also an alloca scope of its own (one
// more pair around it).
// OMP-LABEL: llvm.func @attention
// OMP: omp.parallel
// OMP-COUNT-2: llvm.intr.stacksave
// OMP-COUNT-5: llvm.alloca %{{.*}} x {{i32|f32}} {alignment = 64 : i64}
// OMP-NOT: llvm.intr.stacksave
// OMP-COUNT-2: llvm.intr.stackrestore
// OMP-NOT: llvm.intr.stackrestore
func.func @attention(%q: tensor<2x50x3x40xf32>, %k: tensor<2x50x3x40xf32>, %v: tensor<2x50x3x40xf32>) -> tensor<2x50x3x40xf32> {
  %c = vmoe.attention %q, %k, %v {bf16_products}
      : tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>, tensor<2x50x3x40xf32>
  return %c : tensor<2x50x3x40xf32>
}
