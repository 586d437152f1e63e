// RUN: vmoe-opt %s --vmoe-lower-to-cpu="parallel=true" | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu | FileCheck %s --check-prefix=SEQ

// The GEMMs that convert-vmoe-to-scf builds before bufferization (here the
// expert choice experts with plain weights) pack B into one block scratch
// per expert on the stack of the thread running the expert, never on the
// heap: a memref.alloca of 16 x 512 x 16 floats (512 KB) at the start of the
// expert's iteration, between llvm.intr.stacksave and stackrestore (added
// after the deallocation pipeline), so its bytes are reused by the next
// expert on that thread (which claims it, ^bb1). On OpenMP threads each iteration saves and
// restores its own thread's stack (inside the outer pair that
// convert-scf-to-openmp's alloca scope becomes); sequentially the loop
// over experts does.
// CHECK-LABEL: llvm.func @expert_choice_experts_plain
// CHECK-DAG: %[[N:.*]] = llvm.mlir.constant(131072 : index) : i64
// CHECK: omp.parallel
// CHECK: llvm.atomicrmw add
// CHECK: llvm.intr.stacksave : !llvm.ptr
// CHECK: %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// CHECK-NEXT: llvm.alloca %[[N]] x f32 {alignment = 64 : i64}
// CHECK: llvm.intr.fmuladd
// CHECK: llvm.intr.stackrestore %[[SP]]
// CHECK: llvm.intr.stackrestore
// CHECK-NEXT: llvm.br ^bb1
// CHECK: omp.terminator
// CHECK-NOT: llvm.alloca
// CHECK: llvm.return
// SEQ-LABEL: llvm.func @expert_choice_experts_plain
// SEQ-DAG: %[[N:.*]] = llvm.mlir.constant(131072 : index) : i64
// SEQ: %[[SP:.*]] = llvm.intr.stacksave : !llvm.ptr
// SEQ-NEXT: llvm.alloca %[[N]] x f32 {alignment = 64 : i64}
// SEQ: llvm.intr.stackrestore %[[SP]]
// SEQ-NOT: llvm.alloca
// SEQ: llvm.return
func.func @expert_choice_experts_plain(%x: tensor<1x8x16xf32>, %g: tensor<1x8x4xf32>, %t: tensor<4x1x2xi32>,
    %s: tensor<1x8x4xi32>, %w1: tensor<4x16x32xf32>, %b1: tensor<4x32xf32>, %w2: tensor<4x32x16xf32>,
    %b2: tensor<4x16xf32>) -> tensor<1x8x16xf32> {
  %o = vmoe.expert_choice_experts %x, %g, %t, %s, %w1, %b1, %w2, %b2
      : tensor<1x8x16xf32>, tensor<1x8x4xf32>, tensor<4x1x2xi32>, tensor<1x8x4xi32>,
        tensor<4x16x32xf32>, tensor<4x32xf32>, tensor<4x32x16xf32>, tensor<4x16xf32>
  return %o : tensor<1x8x16xf32>
}
