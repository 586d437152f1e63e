// RUN: vmoe-opt %s -split-input-file -vmoe-lower-strided-copies | FileCheck %s

// A copy into a strided view (the class token row of the token tensor)
// becomes linalg.copy.
// CHECK-LABEL: func.func @strided_target
// CHECK-NOT: memref.copy
// CHECK: linalg.copy ins(%{{.*}} : memref<8x1x64xf32>) outs(%{{.*}} : memref<8x1x64xf32, strided<[1088, 64, 1]>>)
func.func @strided_target(%src: memref<8x1x64xf32>, %dst: memref<8x1x64xf32, strided<[1088, 64, 1]>>) {
  memref.copy %src, %dst : memref<8x1x64xf32> to memref<8x1x64xf32, strided<[1088, 64, 1]>>
  return
}

// -----

/// Contiguous copies stay: they become memcpy.
// CHECK-LABEL: func.func @negative_contiguous
// CHECK: memref.copy
func.func @negative_contiguous(%src: memref<136xf32>, %dst: memref<136xf32>) {
  memref.copy %src, %dst : memref<136xf32> to memref<136xf32>
  return
}
