// Every mgpu function gpu-to-llvm emits for the ops a vmoe model may use:
// async device allocations, copies both ways, 32- and 16-bit memsets,
// events joining two streams, a launch with 64 KiB of dynamic shared
// memory, deallocation, host
// registration of an unranked memref, the default device and a cluster
// launch. The kernel adds 1 to each of its 16 elements
// (fake_cuda_driver.c emulates it).
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @add_one(%a: memref<16xf32>) kernel {
      %block = gpu.block_id x
      %dim = gpu.block_dim x
      %thread = gpu.thread_id x
      %base = arith.muli %block, %dim : index
      %i = arith.addi %base, %thread : index
      %one = arith.constant 1.0 : f32
      %v = memref.load %a[%i] : memref<16xf32>
      %w = arith.addf %v, %one : f32
      memref.store %w, %a[%i] : memref<16xf32>
      gpu.return
    }
  }

  func.func @abi(%in: memref<16xf32>, %out: memref<16xf32>,
                 %out16: memref<16xi16>, %outManaged: memref<16xf32>,
                 %registered: memref<*xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    %smem = arith.constant 65536 : i32
    %half = arith.constant 1.5 : f32
    %minus2 = arith.constant -2 : i16
    %device = arith.constant 0 : i32

    // in -> d, d = 1.5, d += 1 (64 KiB of dynamic shared memory), d -> out;
    // d16 = -2 -> out16 on a second stream; both joined by events.
    %t0 = gpu.wait async
    %d, %t1 = gpu.alloc async [%t0] () : memref<16xf32>
    %d16, %t2 = gpu.alloc async [%t1] () : memref<16xi16>
    %t3 = gpu.memcpy async [%t2] %d, %in : memref<16xf32>, memref<16xf32>
    %t4 = gpu.memset async [%t3] %d, %half : memref<16xf32>, f32
    %t5 = gpu.launch_func async [%t4] @kernels::@add_one
        blocks in (%c1, %c1, %c1) threads in (%c16, %c1, %c1)
        dynamic_shared_memory_size %smem args(%d : memref<16xf32>)
    %t6 = gpu.memcpy async [%t5] %out, %d : memref<16xf32>, memref<16xf32>
    %s0 = gpu.wait async [%t2]
    %s1 = gpu.memset async [%s0] %d16, %minus2 : memref<16xi16>, i16
    %s2 = gpu.memcpy async [%s1] %out16, %d16
        : memref<16xi16>, memref<16xi16>
    %t7 = gpu.wait async [%t6, %s2]
    %t8 = gpu.dealloc async [%t7] %d : memref<16xf32>
    %t9 = gpu.dealloc async [%t8] %d16 : memref<16xi16>
    gpu.wait [%t9]

    gpu.host_register %registered : memref<*xf32>
    gpu.host_unregister %registered : memref<*xf32>
    gpu.set_default_device %device

    // Device memory m = 1.5 (allocated on its own stream), m += 1 by a grid
    // of 2 blocks of 8 threads in one cluster of 2 blocks, m -> outManaged.
    %u0 = gpu.wait async
    %m, %u1 = gpu.alloc async [%u0] () : memref<16xf32>
    %u2 = gpu.memset async [%u1] %m, %half : memref<16xf32>, f32
    gpu.wait [%u2]
    gpu.launch_func @kernels::@add_one
        clusters in (%c2, %c1, %c1) blocks in (%c2, %c1, %c1)
        threads in (%c8, %c1, %c1) args(%m : memref<16xf32>)
    %u3 = gpu.wait async
    %u4 = gpu.memcpy async [%u3] %outManaged, %m
        : memref<16xf32>, memref<16xf32>
    %u5 = gpu.dealloc async [%u4] %m : memref<16xf32>
    gpu.wait [%u5]
    return
  }
}
