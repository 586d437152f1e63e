// RUN: vmoe-opt %s -split-input-file -vmoe-gpu-merge-kernel-modules -verify-diagnostics | FileCheck %s

// Outlining gave each launch a module whose kernel has the function's name;
// all kernels move into the first module, renamed where the name is taken,
// and each launch names its kernel in the merged module. A helper function
// that collides is renamed together with its calls.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @f_kernel {
// CHECK-NEXT: gpu.func @f_kernel(%{{.*}}: memref<16xf32>) kernel
// CHECK: func.func @helper() {
// CHECK: gpu.func @f_kernel_0(%{{.*}}: memref<16xf32>) kernel
// CHECK: func.call @helper_0(
// CHECK: func.func @helper_0(%{{.*}}: memref<16xf32>) -> f32
// CHECK: gpu.func @f_kernel_1(%{{.*}}: memref<16xf32>) kernel
// CHECK-NOT: gpu.module
// CHECK-LABEL: func.func @f
// CHECK: gpu.launch_func @f_kernel::@f_kernel
// CHECK: gpu.launch_func @f_kernel::@f_kernel_0
// CHECK: gpu.launch_func @f_kernel::@f_kernel_1
module attributes {gpu.container_module} {
  gpu.module @f_kernel {
    gpu.func @f_kernel(%m: memref<16xf32>) kernel {
      gpu.return
    }
    func.func @helper() {
      return
    }
  }
  gpu.module @f_kernel_0 {
    gpu.func @f_kernel(%m: memref<16xf32>) kernel {
      %c0 = arith.constant 0 : index
      %v = func.call @helper(%m) : (memref<16xf32>) -> f32
      memref.store %v, %m[%c0] : memref<16xf32>
      gpu.return
    }
    func.func @helper(%m: memref<16xf32>) -> f32 {
      %c1 = arith.constant 1 : index
      %v = memref.load %m[%c1] : memref<16xf32>
      return %v : f32
    }
  }
  gpu.module @f_kernel_1 {
    gpu.func @f_kernel(%m: memref<16xf32>) kernel {
      gpu.return
    }
  }
  func.func @f(%m: memref<16xf32>) {
    %c1 = arith.constant 1 : index
    gpu.launch_func @f_kernel::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    gpu.launch_func @f_kernel_0::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    gpu.launch_func @f_kernel_1::@f_kernel blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) args(%m : memref<16xf32>)
    return
  }
}

// -----

/// One kernel module: nothing to merge.
// CHECK-LABEL: module attributes {gpu.container_module}
// CHECK: gpu.module @negative_single_kernel {
// CHECK: gpu.launch_func @negative_single_kernel::@k
module attributes {gpu.container_module} {
  gpu.module @negative_single_kernel {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  func.func @f() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @negative_single_kernel::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}

// -----

/// Modules compiled for different targets cannot share one binary.
module attributes {gpu.container_module} {
  gpu.module @a [#nvvm.target<chip = "sm_90">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
  // expected-error @+1 {{'gpu.module' op has attributes other than those of @a; merge kernel modules before attaching targets}}
  gpu.module @b [#nvvm.target<chip = "sm_80">] {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}
