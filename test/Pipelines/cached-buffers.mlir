// vmoe-lower-to-cpu{cached-buffers}: the heap buffers of the lowered code
// come from the runtime's buffer cache (lib/Runtime/BufferCache.h), under
// vmoe names, not malloc/free nor MLIR's generic _mlir_memref_to_llvm_*
// functions (a process may load MLIR's runner utilities, which define
// those with plain malloc). Without the option: malloc and free.
// RUN: vmoe-opt %s --vmoe-lower-to-cpu=cached-buffers=true | FileCheck %s
// RUN: vmoe-opt %s --vmoe-lower-to-cpu | FileCheck %s --check-prefix=MALLOC

// CHECK-NOT: _mlir_memref_to_llvm
// CHECK-NOT: @malloc
// CHECK-DAG: llvm.func @vmoe_buffer_alloc(i64) -> !llvm.ptr
// CHECK-DAG: llvm.func @vmoe_buffer_free(!llvm.ptr)
// CHECK: llvm.func @scaled
// CHECK: llvm.call @vmoe_buffer_alloc
// CHECK: llvm.call @vmoe_buffer_free
// MALLOC: llvm.call @malloc
// MALLOC: llvm.call @free

func.func @scaled(%x: tensor<512x512xf32>, %out: memref<512xf32>) {
  %c = arith.constant 2.0 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %s = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i, j)>],
                       iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<512x512xf32>) outs(%e : tensor<512x512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<512x512xf32>
  %z = arith.constant 0.0 : f32
  %i = tensor.empty() : tensor<512xf32>
  %f = linalg.fill ins(%z : f32) outs(%i : tensor<512xf32>) -> tensor<512xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i, j) -> (i, j)>,
                                        affine_map<(i, j) -> (i)>],
                       iterator_types = ["parallel", "reduction"]}
      ins(%s : tensor<512x512xf32>) outs(%f : tensor<512xf32>) {
  ^bb0(%a: f32, %b: f32):
    %m = arith.addf %a, %b : f32
    linalg.yield %m : f32
  } -> tensor<512xf32>
  bufferization.materialize_in_destination %r in restrict writable %out
      : (tensor<512xf32>, memref<512xf32>) -> ()
  return
}
