// Entry points with the calling-convention cases of MLIR's C interface that
// examples/embedding/tiny_layer.mlir lacks, compiled by vmoe-translate
// --vmoe-to-llvmir and called from C through the header --vmoe-to-c-header
// writes (c-header.test).

// A rank-3 tensor argument (the descriptor type tiny_layer.h defines too).
func.func @first(%x: tensor<1x4x2xf32>) -> f32 attributes {llvm.emit_c_interface} {
  %c0 = arith.constant 0 : index
  %v = tensor.extract %x[%c0, %c0, %c0] : tensor<1x4x2xf32>
  return %v : f32
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
