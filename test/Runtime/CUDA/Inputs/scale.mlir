// A kernel that doubles memref<1024xf32> in place, 4 blocks of 256
// threads: the smallest model of what vmoe-compile emits for the GPU. The
// kernel arguments are the five fields of the memref descriptor (allocated,
// aligned, offset, size, stride); fake_cuda_driver.c emulates the kernel
// under that assumption.
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @scale_kernel(%a: memref<1024xf32>) kernel {
      %block = gpu.block_id x
      %dim = gpu.block_dim x
      %thread = gpu.thread_id x
      %base = arith.muli %block, %dim : index
      %i = arith.addi %base, %thread : index
      %v = memref.load %a[%i] : memref<1024xf32>
      %w = arith.addf %v, %v : f32
      memref.store %w, %a[%i] : memref<1024xf32>
      gpu.return
    }
  }

  func.func @scale(%a: memref<1024xf32>) {
    %c1 = arith.constant 1 : index
    %c4 = arith.constant 4 : index
    %c256 = arith.constant 256 : index
    gpu.launch_func @kernels::@scale_kernel
        blocks in (%c4, %c1, %c1) threads in (%c256, %c1, %c1)
        args(%a : memref<1024xf32>)
    return
  }
}
