// The dense contractions of a ViT-S/32 block (2 images of T = 50 tokens,
// D = 384, 6 heads of 64, MLP width 1536; softmax and norms left out) as
// the frontend builds them: each a linalg.generic accumulating into a
// zero-filled output. gemm-kernels.test compiles them with each
// --vmoe-gpu-mma mode (vmoe-gpu-contractions: one tiled GEMM kernel each).
#x_w = [affine_map<(m, k, n) -> (m, k)>, affine_map<(m, k, n) -> (k, n)>, affine_map<(m, k, n) -> (m, n)>]
#linear = {indexing_maps = #x_w, iterator_types = ["parallel", "reduction", "parallel"]}
func.func @dense_attention(%x: tensor<100x384xf32>, %wqkv: tensor<384x1152xf32>, %wout: tensor<384x384xf32>,
    %w1: tensor<384x1536xf32>, %w2: tensor<1536x384xf32>, %out: memref<100x384xf32>)
    attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %e_qkv = tensor.empty() : tensor<100x1152xf32>
  %z_qkv = linalg.fill ins(%zero : f32) outs(%e_qkv : tensor<100x1152xf32>) -> tensor<100x1152xf32>
  %qkv = linalg.generic #linear ins(%x, %wqkv : tensor<100x384xf32>, tensor<384x1152xf32>)
      outs(%z_qkv : tensor<100x1152xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<100x1152xf32>
  %split = tensor.expand_shape %qkv [[0, 1], [2, 3, 4]] output_shape [2, 50, 3, 6, 64]
      : tensor<100x1152xf32> into tensor<2x50x3x6x64xf32>
  %q = tensor.extract_slice %split[0, 0, 0, 0, 0] [2, 50, 1, 6, 64] [1, 1, 1, 1, 1]
      : tensor<2x50x3x6x64xf32> to tensor<2x50x6x64xf32>
  %k = tensor.extract_slice %split[0, 0, 1, 0, 0] [2, 50, 1, 6, 64] [1, 1, 1, 1, 1]
      : tensor<2x50x3x6x64xf32> to tensor<2x50x6x64xf32>
  %v = tensor.extract_slice %split[0, 0, 2, 0, 0] [2, 50, 1, 6, 64] [1, 1, 1, 1, 1]
      : tensor<2x50x3x6x64xf32> to tensor<2x50x6x64xf32>
  // scores[n, h, i, j] = sum_c q[n, i, h, c] k[n, j, h, c] (B k-contiguous).
  %e_s = tensor.empty() : tensor<2x6x50x50xf32>
  %z_s = linalg.fill ins(%zero : f32) outs(%e_s : tensor<2x6x50x50xf32>) -> tensor<2x6x50x50xf32>
  %scores = linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, i, h, c)>,
                                             affine_map<(n, h, i, j, c) -> (n, j, h, c)>,
                                             affine_map<(n, h, i, j, c) -> (n, h, i, j)>],
                            iterator_types = ["parallel", "parallel", "parallel", "parallel", "reduction"]}
      ins(%q, %k : tensor<2x50x6x64xf32>, tensor<2x50x6x64xf32>) outs(%z_s : tensor<2x6x50x50xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x6x50x50xf32>
  // context[n, i, h, c] = sum_j scores[n, h, i, j] v[n, j, h, c].
  %e_c = tensor.empty() : tensor<2x50x6x64xf32>
  %z_c = linalg.fill ins(%zero : f32) outs(%e_c : tensor<2x50x6x64xf32>) -> tensor<2x50x6x64xf32>
  %context = linalg.generic {indexing_maps = [affine_map<(n, h, i, j, c) -> (n, h, i, j)>,
                                              affine_map<(n, h, i, j, c) -> (n, j, h, c)>,
                                              affine_map<(n, h, i, j, c) -> (n, i, h, c)>],
                             iterator_types = ["parallel", "parallel", "parallel", "reduction", "parallel"]}
      ins(%scores, %v : tensor<2x6x50x50xf32>, tensor<2x50x6x64xf32>) outs(%z_c : tensor<2x50x6x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<2x50x6x64xf32>
  %merged = tensor.collapse_shape %context [[0, 1], [2, 3]] : tensor<2x50x6x64xf32> into tensor<100x384xf32>
  %e_o = tensor.empty() : tensor<100x384xf32>
  %z_o = linalg.fill ins(%zero : f32) outs(%e_o : tensor<100x384xf32>) -> tensor<100x384xf32>
  %attn = linalg.generic #linear ins(%merged, %wout : tensor<100x384xf32>, tensor<384x384xf32>)
      outs(%z_o : tensor<100x384xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<100x384xf32>
  %e_h = tensor.empty() : tensor<100x1536xf32>
  %z_h = linalg.fill ins(%zero : f32) outs(%e_h : tensor<100x1536xf32>) -> tensor<100x1536xf32>
  %hidden = linalg.generic #linear ins(%attn, %w1 : tensor<100x384xf32>, tensor<384x1536xf32>)
      outs(%z_h : tensor<100x1536xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<100x1536xf32>
  %e_y = tensor.empty() : tensor<100x384xf32>
  %z_y = linalg.fill ins(%zero : f32) outs(%e_y : tensor<100x384xf32>) -> tensor<100x384xf32>
  %y = linalg.generic #linear ins(%hidden, %w2 : tensor<100x1536xf32>, tensor<1536x384xf32>)
      outs(%z_y : tensor<100x384xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  } -> tensor<100x384xf32>
  bufferization.materialize_in_destination %y in restrict writable %out
      : (tensor<100x384xf32>, memref<100x384xf32>) -> ()
  return
}
