// RUN: vmoe-opt %s --vmoe-lower-to-cpu="parallel=true" | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu="parallel=true dynamic-schedule=false" \
// RUN:   | FileCheck %s --check-prefix=STATIC

// The GEMM packing scratch lives on the stack of the thread computing a
// block, never on the heap: attention scores batched over images x heads
// run their batches on OpenMP threads; in every iteration the microkernel
// packs kT into a memref.alloca between llvm.intr.stacksave and
// stackrestore (convert-scf-to-openmp's alloca scope around the body
// becomes one more save/restore pair), so no call, batch or block calls
// malloc, and the stack bytes are reused from iteration to iteration.
// CHECK-LABEL: llvm.func @attention_scores
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: memref.alloca_scope
// The batches are taken one at a time by whichever thread is free
// (vmoe-balance-omp-loops), each claimed with an atomic add on a counter
// (vmoe-claim-omp-iterations); dynamic-schedule=false keeps libomp's
// static split.
// CHECK: %[[CTR:.*]] = llvm.alloca %{{.*}} x i64
// CHECK: omp.parallel
// CHECK-NOT: omp.wsloop
// CHECK: llvm.atomicrmw add %[[CTR]]
// STATIC-LABEL: llvm.func @attention_scores
// STATIC: omp.wsloop {
// CHECK: llvm.intr.stacksave
// CHECK: llvm.alloca %{{.*}} x f32 {alignment = 64 : i64}
// CHECK: llvm.intr.fmuladd
// CHECK: llvm.intr.stackrestore
// CHECK-NOT: llvm.call @malloc
// CHECK-NOT: llvm.call @free
// CHECK: llvm.return
func.func @attention_scores(%q: memref<8x26x6x64xf32>, %kt: memref<8x6x64x32xf32>,
                            %s: memref<8x6x26x32xf32>) {
  linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, c, j)>,
                                   affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                  iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %kt : memref<8x26x6x64xf32>, memref<8x6x64x32xf32>) outs(%s : memref<8x6x26x32xf32>) {
  ^bb0(%x: f32, %y: f32, %acc: f32):
    %p = arith.mulf %x, %y : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  }
  return
}
