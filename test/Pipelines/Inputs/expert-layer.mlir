// A MoE layer (S = 64 tokens, D = 64, H = 128, E = 4, k = 2) whose expert
// GEMMs gemm-kernels.test compiles with each --vmoe-gpu-mma mode.
func.func @moe_layer(%x: tensor<1x64x64xf32>, %router: tensor<64x4xf32>, %w1: tensor<4x64x128xf32>,
    %b1: tensor<4x128xf32>, %w2: tensor<4x128x64xf32>, %b2: tensor<4x64xf32>, %out: memref<1x64x64xf32>)
    attributes {llvm.emit_c_interface} {
  %g, %ids, %w = vmoe.route %x, %router {k = 2 : i64}
      : tensor<1x64x64xf32>, tensor<64x4xf32> -> tensor<1x64x4xf32>, tensor<1x64x2xi32>, tensor<1x64x2xf32>
  %o = vmoe.bpr_sort %g : tensor<1x64x4xf32> -> tensor<1x64xi32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity_ratio = 1.0 : f64}
      : tensor<1x64x64xf32>, tensor<1x64x2xi32>, tensor<1x64xi32> -> tensor<4x1x?x64xf32>, tensor<1x64x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x?x64xf32>, tensor<4x64x128xf32>, tensor<4x128xf32>, tensor<4x128x64xf32>, tensor<4x64xf32>
  %r = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x?x64xf32>, tensor<1x64x2xi32>, tensor<1x64x2xi32>, tensor<1x64x2xf32> -> tensor<1x64x64xf32>
  bufferization.materialize_in_destination %r in restrict writable %out
      : (tensor<1x64x64xf32>, memref<1x64x64xf32>) -> ()
  return
}
