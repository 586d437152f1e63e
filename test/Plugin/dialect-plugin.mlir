// RUN: mlir-opt %s --load-dialect-plugin=%vmoe_plugin | FileCheck %s
// RUN: mlir-opt %s --load-dialect-plugin=%vmoe_plugin --mlir-print-op-generic \
// RUN:   | mlir-opt --load-dialect-plugin=%vmoe_plugin | FileCheck %s
// RUN: not mlir-opt %s 2>&1 | FileCheck %s --check-prefix=NO-PLUGIN

// The upstream mlir-opt parses, verifies and prints vmoe IR once it loads the
// plugin, and rejects it without.

// NO-PLUGIN: Dialect `vmoe' not found for custom op 'vmoe.route'

// CHECK-LABEL: func.func @layer
// CHECK: vmoe.route %{{.*}}, %{{.*}} {k = 2 : i64}
// CHECK: vmoe.bpr_sort %{{.*}} {k = 2 : i64, score = #vmoe.priority_score<sum_topk>}
// CHECK: vmoe.dispatch %{{.*}}, %{{.*}}, %{{.*}} {capacity = 8 : i64}
// CHECK: vmoe.expert_ffn {{.*}} {activation = #vmoe.activation<relu>}
// CHECK: vmoe.combine
func.func @layer(%x: tensor<1x16x8xf32>, %r: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>) -> tensor<1x16x8xf32> {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %g {score = #vmoe.priority_score<sum_topk>, k = 2 : i64}
      : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity = 8 : i64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x8x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2 {activation = #vmoe.activation<relu>}
      : tensor<4x1x8x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x8x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  return %out : tensor<1x16x8xf32>
}
