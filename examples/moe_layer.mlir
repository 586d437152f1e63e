// A V-MoE-S/32 MoE layer (SPEC §3): one routing group of 8 images x 50
// tokens, width D = 512, expert hidden width H = 2048, E = 32 experts, top-2
// routing with Batch Prioritized Routing and capacity ratio C = 1.05.
// Run: vmoe-opt examples/moe_layer.mlir --vmoe-buffer-sizing
func.func @moe_layer(%x: tensor<1x400x512xf32>, %router: tensor<512x32xf32>,
                     %w1: tensor<32x512x2048xf32>, %b1: tensor<32x2048xf32>,
                     %w2: tensor<32x2048x512xf32>, %b2: tensor<32x512xf32>)
    -> tensor<1x400x512xf32> {
  %gates, %ids, %weights = vmoe.route %x, %router {k = 2 : i64}
      : tensor<1x400x512xf32>, tensor<512x32xf32>
      -> tensor<1x400x32xf32>, tensor<1x400x2xi32>, tensor<1x400x2xf32>
  %order = vmoe.bpr_sort %gates : tensor<1x400x32xf32> -> tensor<1x400xi32>
  %buffers, %slots = vmoe.dispatch %x, %ids, %order {capacity_ratio = 1.05 : f64}
      : tensor<1x400x512xf32>, tensor<1x400x2xi32>, tensor<1x400xi32>
      -> tensor<32x1x?x512xf32>, tensor<1x400x2xi32>
  %y = vmoe.expert_ffn %buffers, %w1, %b1, %w2, %b2
      : tensor<32x1x?x512xf32>, tensor<32x512x2048xf32>, tensor<32x2048xf32>,
        tensor<32x2048x512xf32>, tensor<32x512xf32>
  %out = vmoe.combine %y, %ids, %slots, %weights
      : tensor<32x1x?x512xf32>, tensor<1x400x2xi32>, tensor<1x400x2xi32>,
        tensor<1x400x2xf32> -> tensor<1x400x512xf32>
  return %out : tensor<1x400x512xf32>
}
