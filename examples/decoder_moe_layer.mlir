// Decoder-style MoE layers (SPEC §8) at Mixtral's routing: 8 SwiGLU experts,
// top-2 KeepTopK renormalized, 512 tokens of width D = 512, expert hidden
// width H = 1024.
//   @mixtral_dropless          capacity = none (C = E/k, so B = S), one
//                              shared expert, the auxiliary losses
//   @mixtral_training_losses   the training graph: noisy gating with the
//                              standard normal samples %noise (noise_std 1)
//                              in the router and in the losses
//   @switch_c125               Switch routing: k = 1, capacity ratio 1.25
// Run: vmoe-opt examples/decoder_moe_layer.mlir --vmoe-lower-to-cpu
func.func @mixtral_dropless(%x: tensor<1x512x512xf32>, %router: tensor<512x8xf32>,
    %w_gate: tensor<8x512x1024xf32>, %w_up: tensor<8x512x1024xf32>,
    %w_down: tensor<8x1024x512xf32>, %s_gate: tensor<1x512x1024xf32>,
    %s_up: tensor<1x512x1024xf32>, %s_down: tensor<1x1024x512xf32>)
    -> (tensor<1x512x512xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %gates, %ids, %weights = vmoe.route %x, %router
      {k = 2 : i64, order = #vmoe.route_order<topk_softmax>, normalize = true}
      : tensor<1x512x512xf32>, tensor<512x8xf32>
      -> tensor<1x512x8xf32>, tensor<1x512x2xi32>, tensor<1x512x2xf32>
  %buffers, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 4.0 : f64}
      : tensor<1x512x512xf32>, tensor<1x512x2xi32>
      -> tensor<8x1x512x512xf32>, tensor<1x512x2xi32>
  %y = vmoe.expert_swiglu %buffers, %w_gate, %w_up, %w_down
      : tensor<8x1x512x512xf32>, tensor<8x512x1024xf32>, tensor<8x512x1024xf32>,
        tensor<8x1024x512xf32>
  %routed = vmoe.combine %y, %ids, %slots, %weights
      : tensor<8x1x512x512xf32>, tensor<1x512x2xi32>, tensor<1x512x2xi32>,
        tensor<1x512x2xf32> -> tensor<1x512x512xf32>
  %xs = tensor.expand_shape %x [[0, 1], [2], [3]] output_shape [1, 1, 512, 512]
      : tensor<1x512x512xf32> into tensor<1x1x512x512xf32>
  %ys = vmoe.expert_swiglu %xs, %s_gate, %s_up, %s_down
      : tensor<1x1x512x512xf32>, tensor<1x512x1024xf32>, tensor<1x512x1024xf32>,
        tensor<1x1024x512xf32>
  %shared = tensor.collapse_shape %ys [[0, 1], [2], [3]]
      : tensor<1x1x512x512xf32> into tensor<1x512x512xf32>
  %init = tensor.empty() : tensor<1x512x512xf32>
  %out = linalg.add ins(%routed, %shared : tensor<1x512x512xf32>, tensor<1x512x512xf32>)
      outs(%init : tensor<1x512x512xf32>) -> tensor<1x512x512xf32>
  %imp, %load, %gshard = vmoe.router_losses %x, %router {k = 2 : i64}
      : tensor<1x512x512xf32>, tensor<512x8xf32>
      -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return %out, %imp, %load, %gshard
      : tensor<1x512x512xf32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

func.func @mixtral_training_losses(%x: tensor<1x512x512xf32>,
    %router: tensor<512x8xf32>, %noise: tensor<1x512x8xf32>)
    -> (tensor<1x512x2xi32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>) {
  %gates, %ids, %weights = vmoe.route %x, %router
      noise(%noise : tensor<1x512x8xf32>)
      {k = 2 : i64, order = #vmoe.route_order<topk_softmax>, normalize = true,
       noise_std = 1.0 : f64}
      : tensor<1x512x512xf32>, tensor<512x8xf32>
      -> tensor<1x512x8xf32>, tensor<1x512x2xi32>, tensor<1x512x2xf32>
  %imp, %load, %gshard = vmoe.router_losses %x, %router
      noise(%noise : tensor<1x512x8xf32>) {k = 2 : i64, noise_std = 1.0 : f64}
      : tensor<1x512x512xf32>, tensor<512x8xf32>
      -> tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
  return %ids, %imp, %load, %gshard
      : tensor<1x512x2xi32>, tensor<1xf32>, tensor<1xf32>, tensor<1xf32>
}

func.func @switch_c125(%x: tensor<1x512x512xf32>, %router: tensor<512x8xf32>,
    %w_gate: tensor<8x512x1024xf32>, %w_up: tensor<8x512x1024xf32>,
    %w_down: tensor<8x1024x512xf32>) -> tensor<1x512x512xf32> {
  %gates, %ids, %weights = vmoe.route %x, %router {k = 1 : i64}
      : tensor<1x512x512xf32>, tensor<512x8xf32>
      -> tensor<1x512x8xf32>, tensor<1x512x1xi32>, tensor<1x512x1xf32>
  %buffers, %slots = vmoe.dispatch %x, %ids {capacity_ratio = 1.25 : f64}
      : tensor<1x512x512xf32>, tensor<1x512x1xi32>
      -> tensor<8x1x80x512xf32>, tensor<1x512x1xi32>
  %y = vmoe.expert_swiglu %buffers, %w_gate, %w_up, %w_down
      : tensor<8x1x80x512xf32>, tensor<8x512x1024xf32>, tensor<8x512x1024xf32>,
        tensor<8x1024x512xf32>
  %out = vmoe.combine %y, %ids, %slots, %weights
      : tensor<8x1x80x512xf32>, tensor<1x512x1xi32>, tensor<1x512x1xi32>,
        tensor<1x512x1xf32> -> tensor<1x512x512xf32>
  return %out : tensor<1x512x512xf32>
}
