// A hand-routed MoE layer: 4 tokens of width 2, 2 experts, top-1 BPR
// routing, capacity ratio C at run time (compiled maximum: 2 slots per
// expert). Results are written into the memref arguments; the C interface
// (llvm.emit_c_interface) makes it callable as _mlir_ciface_tiny_layer.
//
// With x = [[1, 0], [0, 1], [2, 0], [0, 0]]: C = 1.0 gives 2 slots per
// expert (BPR fills expert 0 with tokens 2 and 0 and drops token 3, expert
// 1 takes token 1); C = 0.5 gives 1 slot (tokens 0 and 3 dropped).
func.func @tiny_layer(%x: tensor<1x4x2xf32>, %c: f64, %ids_out: memref<1x4x1xi32>,
                      %slots_out: memref<1x4x1xi32>, %out_out: memref<1x4x2xf32>)
    attributes {llvm.emit_c_interface} {
  %router = arith.constant dense<[[1.0, 0.0], [0.0, 1.0]]> : tensor<2x2xf32>
  %w1 = arith.constant dense<[[[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 1.0]]]> : tensor<2x2x2xf32>
  %b = arith.constant dense<0.0> : tensor<2x2xf32>
  %gates, %ids, %w = vmoe.route %x, %router {k = 1 : i64}
      : tensor<1x4x2xf32>, tensor<2x2xf32> -> tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x4x2xf32> -> tensor<1x4xi32>
  %cap = vmoe.capacity %c {k = 1 : i64, num_experts = 2 : i64, tokens_per_group = 4 : i64,
                           max_capacity = 2 : i64} : f64
  %buf, %slots = vmoe.dispatch %x, %ids, %order capacity(%cap) {capacity_ratio = 1.0 : f64}
      : tensor<1x4x2xf32>, tensor<1x4x1xi32>, tensor<1x4xi32> -> tensor<2x1x?x2xf32>, tensor<1x4x1xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b, %w1, %b {activation = #vmoe.activation<relu>}
      : tensor<2x1x?x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>, tensor<2x2x2xf32>, tensor<2x2xf32>
  %out = vmoe.combine %y, %ids, %slots, %w
      : tensor<2x1x?x2xf32>, tensor<1x4x1xi32>, tensor<1x4x1xi32>, tensor<1x4x1xf32> -> tensor<1x4x2xf32>
  bufferization.materialize_in_destination %ids in restrict writable %ids_out
      : (tensor<1x4x1xi32>, memref<1x4x1xi32>) -> ()
  bufferization.materialize_in_destination %slots in restrict writable %slots_out
      : (tensor<1x4x1xi32>, memref<1x4x1xi32>) -> ()
  bufferization.materialize_in_destination %out in restrict writable %out_out
      : (tensor<1x4x2xf32>, memref<1x4x2xf32>) -> ()
  return
}
