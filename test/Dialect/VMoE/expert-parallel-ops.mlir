// RUN: vmoe-opt %s -split-input-file | vmoe-opt -split-input-file | FileCheck %s
// RUN: vmoe-opt %s -split-input-file --mlir-print-op-generic | vmoe-opt -split-input-file | FileCheck %s

// Round trip of the expert parallelism ops (docs/Dialect.md).

// CHECK-LABEL: func.func @expert_shard_two_ranks
// CHECK: vmoe.expert_shard %{{.*}} {ranks = 2 : i64} : tensor<8x10x512xf32> -> tensor<4x10x512xf32>
func.func @expert_shard_two_ranks(%w1: tensor<8x10x512xf32>) -> tensor<4x10x512xf32> {
  %w1r = vmoe.expert_shard %w1 {ranks = 2 : i64}
      : tensor<8x10x512xf32> -> tensor<4x10x512xf32>
  return %w1r : tensor<4x10x512xf32>
}

// -----

// CHECK-LABEL: func.func @exchange_two_ranks
// CHECK: %[[ROWS:.*]] = vmoe.exchange_dispatch %{{.*}}, %{{.*}}, %{{.*}} {layer = 0 : i64, ranks = 2 : i64} : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<4x2x4x10xf32>
// CHECK: vmoe.exchange_combine %[[ROWS]], %{{.*}}, %{{.*}} {layer = 0 : i64, ranks = 2 : i64} : tensor<4x2x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32> -> tensor<8x1x4x10xf32>
func.func @exchange_two_ranks(%buffers: tensor<8x1x4x10xf32>, %ids: tensor<1x8x2xi32>,
                              %slots: tensor<1x8x2xi32>) -> tensor<8x1x4x10xf32> {
  %rows = vmoe.exchange_dispatch %buffers, %ids, %slots
      {layer = 0 : i64, ranks = 2 : i64}
      : tensor<8x1x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
      -> tensor<4x2x4x10xf32>
  %y = vmoe.exchange_combine %rows, %ids, %slots
      {layer = 0 : i64, ranks = 2 : i64}
      : tensor<4x2x4x10xf32>, tensor<1x8x2xi32>, tensor<1x8x2xi32>
      -> tensor<8x1x4x10xf32>
  return %y : tensor<8x1x4x10xf32>
}

// -----

// One rank: the exchanges keep the shapes.
// CHECK-LABEL: func.func @exchange_one_rank_dynamic_groups
// CHECK: vmoe.exchange_dispatch {{.*}} -> tensor<4x?x4x10xf32>
func.func @exchange_one_rank_dynamic_groups(%buffers: tensor<4x?x4x10xf32>, %ids: tensor<?x8x2xi32>,
                                            %slots: tensor<?x8x2xi32>) -> tensor<4x?x4x10xf32> {
  %rows = vmoe.exchange_dispatch %buffers, %ids, %slots
      {layer = 3 : i64, ranks = 1 : i64}
      : tensor<4x?x4x10xf32>, tensor<?x8x2xi32>, tensor<?x8x2xi32>
      -> tensor<4x?x4x10xf32>
  return %rows : tensor<4x?x4x10xf32>
}
