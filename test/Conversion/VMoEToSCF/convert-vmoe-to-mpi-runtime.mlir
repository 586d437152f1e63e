// RUN: vmoe-opt %s -split-input-file -convert-vmoe-to-mpi-runtime -verify-diagnostics | FileCheck %s

// The exchanges become calls of the MPI runtime on the operands' buffers and
// a fresh result buffer; the shard is a slice at vmoe_mpi_rank() * E / R.
// CHECK-LABEL: func.func @exchange_and_shard
// CHECK: %[[IN:.*]] = bufferization.to_buffer %{{.*}} read_only
// CHECK: %[[INC:.*]] = memref.cast %[[IN]] : {{.*}} to memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>
// CHECK: %[[OUT:.*]] = memref.alloc() : memref<4x2x4x10xf32>
// CHECK: %[[L:.*]] = arith.constant 7 : i64
// CHECK: %[[OUTC:.*]] = memref.cast %[[OUT]]
// CHECK: call @vmoe_mpi_exchange_dispatch(%[[INC]], %{{.*}}, %{{.*}}, %[[OUTC]], %[[L]])
// CHECK: %[[ROWS:.*]] = bufferization.to_tensor %[[OUT]] restrict writable : memref<4x2x4x10xf32> to tensor<4x2x4x10xf32>
// CHECK: %[[R:.*]] = call @vmoe_mpi_rank() : () -> i64
// CHECK: %[[RI:.*]] = arith.index_cast %[[R]] : i64 to index
// CHECK: %[[FIRST:.*]] = arith.muli %[[RI]], %{{.*}} : index
// CHECK: tensor.extract_slice %{{.*}}[%[[FIRST]], 0, 0] [4, 10, 16] [1, 1, 1] : tensor<8x10x16xf32> to tensor<4x10x16xf32>
// CHECK: call @vmoe_mpi_exchange_combine
// CHECK: func.func private @vmoe_mpi_exchange_dispatch(memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, memref<?x?x?xi32, strided<[?, ?, 1], offset: ?>>, memref<?x?x?xi32, strided<[?, ?, 1], offset: ?>>, memref<?x?x?x?xf32, strided<[?, ?, ?, 1], offset: ?>>, i64) attributes {llvm.emit_c_interface}
// CHECK: func.func private @vmoe_mpi_rank() -> i64{{$}}
// CHECK: func.func private @vmoe_mpi_exchange_combine
// CHECK-NOT: vmoe.
func.func @exchange_and_shard(%buffers: tensor<8x1x4x10xf32>, %ids: tensor<1x8x2xi32>,
                              %slots: tensor<1x8x2xi32>, %w1: tensor<8x10x16xf32>)
    -> (tensor<8x1x4x10xf32>, tensor<4x10x16xf32>) {
  %rows = vmoe.exchange_dispatch %buffers, %ids, %slots
      {layer = 7 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
      -> tensor<4x2x4x10xf32>
  %shard = vmoe.expert_shard %w1 {ranks = 2 : i64}
      : tensor<8x10x16xf32> -> tensor<4x10x16xf32>
  %y = vmoe.exchange_combine %rows, %ids, %slots
      {layer = 7 : i64, ranks = 2 : i64}
      : tensor<4x2x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
      -> tensor<8x1x4x10xf32>
  return %y, %shard : tensor<8x1x4x10xf32>, tensor<4x10x16xf32>
}

// -----

/// Other vmoe ops are left for convert-vmoe-to-scf.
// CHECK-LABEL: func.func @negative_other_ops
// CHECK: vmoe.bpr_sort
// CHECK-NOT: call @vmoe_mpi
func.func @negative_other_ops(%g: tensor<1x8x4xf32>) -> tensor<1x8xi32> {
  %o = vmoe.bpr_sort %g : tensor<1x8x4xf32> -> tensor<1x8xi32>
  return %o : tensor<1x8xi32>
}

// -----

/// Dynamic shapes cannot be lowered: one error.
func.func @negative_dynamic(%b: tensor<4x?x4x10xf32>, %ids: tensor<?x8x2xi32>) -> tensor<4x?x4x10xf32> {
  // expected-error @+1 {{needs static shapes to be lowered to the MPI runtime}}
  %r = vmoe.exchange_dispatch %b, %ids, %ids {layer = 0 : i64, ranks = 1 : i64}
      : tensor<4x?x4x10xf32>, tensor<?x8x2xi32>, tensor<?x8x2xi32> -> tensor<4x?x4x10xf32>
  return %r : tensor<4x?x4x10xf32>
}
