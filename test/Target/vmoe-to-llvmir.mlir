// RUN: vmoe-translate --vmoe-to-llvmir %s | FileCheck %s
// RUN: vmoe-opt --vmoe-lower-to-cpu %s | mlir-translate --mlir-to-llvmir | FileCheck %s

// One step (vmoe-translate) or two (vmoe-opt + mlir-translate) give the same
// LLVM IR entry points, including the C interface wrapper.
// CHECK: define void @route_ids(
// CHECK: define void @_mlir_ciface_route_ids(
func.func @route_ids(%x: tensor<1x8x16xf32>, %r: tensor<16x4xf32>, %out: memref<1x8x2xi32>)
    attributes {llvm.emit_c_interface} {
  %g, %ids, %w = vmoe.route %x, %r {k = 2 : i64}
      : tensor<1x8x16xf32>, tensor<16x4xf32> -> tensor<1x8x4xf32>, tensor<1x8x2xi32>, tensor<1x8x2xf32>
  bufferization.materialize_in_destination %ids in restrict writable %out
      : (tensor<1x8x2xi32>, memref<1x8x2xi32>) -> ()
  return
}
