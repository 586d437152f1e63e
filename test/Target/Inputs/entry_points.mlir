// Entry points with every calling-convention case of MLIR's C interface,
// compiled by vmoe-translate --vmoe-to-llvmir and called from C through the
// header --vmoe-to-c-header writes (c-header.test).

// Tensors and memrefs by descriptor pointer, a scalar by value, results
// written in place: the hand-routed layer of Integration/CPU/c-harness.mlir.
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

// One scalar result: returned by value.
func.func @sum(%x: tensor<4xf32>) -> f32 attributes {llvm.emit_c_interface} {
  %zero = arith.constant dense<0.0> : tensor<f32>
  %s = linalg.reduce ins(%x : tensor<4xf32>) outs(%zero : tensor<f32>) dimensions = [0]
      (%in: f32, %acc: f32) {
        %a = arith.addf %in, %acc : f32
        linalg.yield %a : f32
      }
  %v = tensor.extract %s[] : tensor<f32>
  return %v : f32
}

// One tensor result of a dynamic size: a descriptor written through the
// first argument.
func.func @scale(%x: tensor<?xf32>, %s: f32) -> tensor<?xf32> attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %n = tensor.dim %x, %c0 : tensor<?xf32>
  %init = tensor.empty(%n) : tensor<?xf32>
  %y = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                       iterator_types = ["parallel"]}
      ins(%x : tensor<?xf32>) outs(%init : tensor<?xf32>) {
    ^bb0(%in: f32, %out: f32):
      %m = arith.mulf %in, %s : f32
      linalg.yield %m : f32
  } -> tensor<?xf32>
  return %y : tensor<?xf32>
}

// Several results (index, i1, a tensor): packed into a struct written
// through the first argument.
func.func @count_positive(%x: tensor<4xf32>, %limit: index)
    -> (index, i1, tensor<4xi32>) attributes {llvm.emit_c_interface} {
  %zero = arith.constant 0.0 : f32
  %init = tensor.empty() : tensor<4xi32>
  %flags = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>, affine_map<(i) -> (i)>],
                           iterator_types = ["parallel"]}
      ins(%x : tensor<4xf32>) outs(%init : tensor<4xi32>) {
    ^bb0(%in: f32, %out: i32):
      %p = arith.cmpf ogt, %in, %zero : f32
      %e = arith.extui %p : i1 to i32
      linalg.yield %e : i32
  } -> tensor<4xi32>
  %zi = arith.constant dense<0> : tensor<i32>
  %s = linalg.reduce ins(%flags : tensor<4xi32>) outs(%zi : tensor<i32>) dimensions = [0]
      (%in: i32, %acc: i32) {
        %a = arith.addi %in, %acc : i32
        linalg.yield %a : i32
      }
  %v = tensor.extract %s[] : tensor<i32>
  %n = arith.index_cast %v : i32 to index
  %over = arith.cmpi ugt, %n, %limit : index
  return %n, %over, %flags : index, i1, tensor<4xi32>
}

// Without llvm.emit_c_interface: not in the header.
func.func @internal(%x: f32) -> f32 {
  return %x : f32
}
