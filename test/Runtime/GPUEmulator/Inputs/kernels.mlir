// Kernels that exercise the GPU emulator (test/Runtime/GPUEmulator). Each
// host function launches one kernel on device memory: memref<256xf32> in,
// memref<256xf32> out.
module attributes {gpu.container_module} {
  // out[0] = sum of in, a tree reduction in shared memory (256 threads,
  // eight barriers).
  func.func @reduce(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
        workgroup(%sm : memref<256xf32, #gpu.address_space<workgroup>>) {
      %v = memref.load %in[%tx] : memref<256xf32>
      memref.store %v, %sm[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
      gpu.barrier
      %c0 = arith.constant 0 : index
      %c128 = arith.constant 128 : index
      %c2 = arith.constant 2 : index
      scf.for %s = %c0 to %c128 step %c1 {
        // Strides 128, 64, ..., 1 while s < 8.
        %c8 = arith.constant 8 : index
        %active = arith.cmpi slt, %s, %c8 : index
        scf.if %active {
          %c7 = arith.constant 7 : index
          %e = arith.subi %c7, %s : index
          %ei = arith.index_cast %e : index to i32
          %one = arith.constant 1 : i32
          %stride_i = arith.shli %one, %ei : i32
          %stride = arith.index_cast %stride_i : i32 to index
          %lo = arith.cmpi slt, %tx, %stride : index
          scf.if %lo {
            %j = arith.addi %tx, %stride : index
            %a = memref.load %sm[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
            %b = memref.load %sm[%j] : memref<256xf32, #gpu.address_space<workgroup>>
            %sum = arith.addf %a, %b : f32
            memref.store %sum, %sm[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
          }
          gpu.barrier
        }
      }
      %first = arith.cmpi eq, %tx, %c0 : index
      scf.if %first {
        %r = memref.load %sm[%c0] : memref<256xf32, #gpu.address_space<workgroup>>
        memref.store %r, %out[%c0] : memref<256xf32>
      }
      gpu.terminator
    }
    return
  }

  // The same sum without the barriers: thread 0 reads partial sums that
  // other threads have not written yet (shared memory starts as NaN).
  func.func @reduce_racy(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
        workgroup(%sm : memref<256xf32, #gpu.address_space<workgroup>>) {
      %c0 = arith.constant 0 : index
      %v = memref.load %in[%tx] : memref<256xf32>
      memref.store %v, %sm[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
      %first = arith.cmpi eq, %tx, %c0 : index
      scf.if %first {
        %zero = arith.constant 0.0 : f32
        %r = scf.for %i = %c0 to %c256 step %c1 iter_args(%acc = %zero) -> f32 {
          %x = memref.load %sm[%i] : memref<256xf32, #gpu.address_space<workgroup>>
          %y = arith.addf %acc, %x : f32
          scf.yield %y : f32
        }
        memref.store %r, %out[%c0] : memref<256xf32>
      }
      gpu.terminator
    }
    return
  }

  // Half of the block waits at a barrier the other half never reaches.
  func.func @divergent(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1) {
      %c128 = arith.constant 128 : index
      %low = arith.cmpi slt, %tx, %c128 : index
      scf.if %low {
        gpu.barrier
      }
      gpu.terminator
    }
    return
  }

  // A grid of 70,000 blocks in y (the limit is 65,535).
  func.func @tall(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %tall = arith.constant 70000 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %tall, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c1, %sy = %c1, %sz = %c1) {
      gpu.terminator
    }
    return
  }

  // out[i] = the sum of in over the warp of i (butterfly shuffles), in a
  // grid of 2 x 3 blocks of 8 x 16 threads: also checks the ids.
  func.func @warp_sum(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c2 = arith.constant 2 : index
    %c3 = arith.constant 3 : index
    %c8 = arith.constant 8 : index
    %c16 = arith.constant 16 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c8, %sy = %c16, %sz = %c1) {
      %row = arith.muli %ty, %c8 : index
      %local = arith.addi %row, %tx : index
      %c128 = arith.constant 128 : index
      %base = arith.muli %bx, %c128 : index
      %i = arith.addi %base, %local : index
      %v = memref.load %in[%i] : memref<256xf32>
      %w = arith.constant 32 : i32
      %o1 = arith.constant 1 : i32
      %o2 = arith.constant 2 : i32
      %o4 = arith.constant 4 : i32
      %o8 = arith.constant 8 : i32
      %o16 = arith.constant 16 : i32
      %s1, %p1 = gpu.shuffle xor %v, %o1, %w : f32
      %a1 = arith.addf %v, %s1 : f32
      %s2, %p2 = gpu.shuffle xor %a1, %o2, %w : f32
      %a2 = arith.addf %a1, %s2 : f32
      %s4, %p4 = gpu.shuffle xor %a2, %o4, %w : f32
      %a4 = arith.addf %a2, %s4 : f32
      %s8, %p8 = gpu.shuffle xor %a4, %o8, %w : f32
      %a8 = arith.addf %a4, %s8 : f32
      %s16, %p16 = gpu.shuffle xor %a8, %o16, %w : f32
      %a16 = arith.addf %a8, %s16 : f32
      memref.store %a16, %out[%i] : memref<256xf32>
      gpu.terminator
    }
    return
  }

  // One m16n8k8 TF32 mma.sync: lane l loads its fragments of A (in[0..128),
  // 16 x 8 row-major) and B (in[128..192), 8 x 8 row-major as k x n) in the
  // PTX ISA's layout and stores D = A B (16 x 8) to out[0..128).
  func.func @mma_tf32(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1) {
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c128 = arith.constant 128 : index
      %g = arith.divui %tx, %c4 : index
      %t = arith.remui %tx, %c4 : index
      %g8 = arith.addi %g, %c8 : index
      %t4 = arith.addi %t, %c4 : index
      %a0 = func.call @load_word(%in, %g, %t, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      %a1 = func.call @load_word(%in, %g8, %t, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      %a2 = func.call @load_word(%in, %g, %t4, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      %a3 = func.call @load_word(%in, %g8, %t4, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      // B[k, n] at in[128 + 8 k + n].
      %bbase = arith.addi %g, %c128 : index
      %b0 = func.call @load_word(%in, %t, %bbase, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      %b1 = func.call @load_word(%in, %t4, %bbase, %c8, %c1) : (memref<256xf32>, index, index, index, index) -> i32
      %z = arith.constant 0.0 : f32
      %d = nvvm.mma.sync A[%a0, %a1, %a2, %a3] B[%b0, %b1] C[%z, %z, %z, %z]
          {layoutA = #nvvm.mma_layout<row>, layoutB = #nvvm.mma_layout<col>,
           multiplicandAPtxType = #nvvm.mma_type<tf32>,
           multiplicandBPtxType = #nvvm.mma_type<tf32>,
           shape = #nvvm.shape<m = 16, n = 8, k = 8>}
          : (i32, i32, f32) -> !llvm.struct<(f32, f32, f32, f32)>
      %d0 = llvm.extractvalue %d[0] : !llvm.struct<(f32, f32, f32, f32)>
      %d1 = llvm.extractvalue %d[1] : !llvm.struct<(f32, f32, f32, f32)>
      %d2 = llvm.extractvalue %d[2] : !llvm.struct<(f32, f32, f32, f32)>
      %d3 = llvm.extractvalue %d[3] : !llvm.struct<(f32, f32, f32, f32)>
      %c2 = arith.constant 2 : index
      %col = arith.muli %t, %c2 : index
      %col1 = arith.addi %col, %c1 : index
      func.call @store(%out, %g, %col, %d0) : (memref<256xf32>, index, index, f32) -> ()
      func.call @store(%out, %g, %col1, %d1) : (memref<256xf32>, index, index, f32) -> ()
      func.call @store(%out, %g8, %col, %d2) : (memref<256xf32>, index, index, f32) -> ()
      func.call @store(%out, %g8, %col1, %d3) : (memref<256xf32>, index, index, f32) -> ()
      gpu.terminator
    }
    return
  }

  // Lane l of one warp: ldmatrix .x1 of the 8 x 8 f16 matrix in[0..64)
  // (values 0..63) staged in shared memory; out[2 l], out[2 l + 1] = its
  // two halves, and out[64 + 2 l], out[64 + 2 l + 1] those of .trans.
  func.func @ldmatrix(%in: memref<256xf32>, %out: memref<256xf32>) {
    %c1 = arith.constant 1 : index
    %c32 = arith.constant 32 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
        workgroup(%sm : memref<8x8xf16, #gpu.address_space<workgroup>>) {
      %c0 = arith.constant 0 : index
      %c2 = arith.constant 2 : index
      %c4 = arith.constant 4 : index
      %c8 = arith.constant 8 : index
      %c64 = arith.constant 64 : index
      // Two elements per lane: 64 in all.
      %e0 = arith.muli %tx, %c2 : index
      %e1 = arith.addi %e0, %c1 : index
      func.call @stage(%in, %sm, %e0) : (memref<256xf32>, memref<8x8xf16, #gpu.address_space<workgroup>>, index) -> ()
      func.call @stage(%in, %sm, %e1) : (memref<256xf32>, memref<8x8xf16, #gpu.address_space<workgroup>>, index) -> ()
      gpu.barrier
      // Lanes 0..7 give row addresses; the others repeat them.
      %r = arith.remui %tx, %c8 : index
      %m = nvgpu.ldmatrix %sm[%r, %c0] {numTiles = 1 : i32, transpose = false}
          : memref<8x8xf16, #gpu.address_space<workgroup>> -> vector<1x2xf16>
      %mt = nvgpu.ldmatrix %sm[%r, %c0] {numTiles = 1 : i32, transpose = true}
          : memref<8x8xf16, #gpu.address_space<workgroup>> -> vector<1x2xf16>
      func.call @unpack(%out, %m, %e0) : (memref<256xf32>, vector<1x2xf16>, index) -> ()
      %t0 = arith.addi %e0, %c64 : index
      func.call @unpack(%out, %mt, %t0) : (memref<256xf32>, vector<1x2xf16>, index) -> ()
      gpu.terminator
    }
    return
  }

  // cp.async of in[0..256) into shared memory, 4 bytes per thread (the
  // last 8 threads copy 0 source bytes: zero fill), then out = shared. With
  // %wait false, no wait_group: the threads end with their copies in
  // flight, which fails the launch.
  func.func @async_copy(%in: memref<256xf32>, %out: memref<256xf32>, %wait: i1) {
    %c1 = arith.constant 1 : index
    %c256 = arith.constant 256 : index
    gpu.launch blocks(%bx, %by, %bz) in (%gx = %c1, %gy = %c1, %gz = %c1)
        threads(%tx, %ty, %tz) in (%sx = %c256, %sy = %c1, %sz = %c1)
        workgroup(%sm : memref<256xf32, #gpu.address_space<workgroup>>) {
      %c248 = arith.constant 248 : index
      %c0 = arith.constant 0 : index
      %keep = arith.cmpi slt, %tx, %c248 : index
      %c1e = arith.constant 1 : index
      %n = arith.select %keep, %c1e, %c0 : index
      %token = nvgpu.device_async_copy %in[%tx], %sm[%tx], 1, %n
          : memref<256xf32> to memref<256xf32, #gpu.address_space<workgroup>>
      %group = nvgpu.device_async_create_group %token
      scf.if %wait {
        nvgpu.device_async_wait %group {numGroups = 0 : i32}
      }
      gpu.barrier
      %v = memref.load %sm[%tx] : memref<256xf32, #gpu.address_space<workgroup>>
      memref.store %v, %out[%tx] : memref<256xf32>
      gpu.terminator
    }
    return
  }

  // Helpers, inlined into the kernels by the outliner's callers.
  func.func private @load_word(%m: memref<256xf32>, %i: index, %j: index,
                               %stride: index, %unused: index) -> i32 {
    %row = arith.muli %i, %stride : index
    %at = arith.addi %row, %j : index
    %v = memref.load %m[%at] : memref<256xf32>
    %w = arith.bitcast %v : f32 to i32
    return %w : i32
  }
  func.func private @store(%m: memref<256xf32>, %i: index, %j: index, %v: f32) {
    %c8 = arith.constant 8 : index
    %row = arith.muli %i, %c8 : index
    %at = arith.addi %row, %j : index
    memref.store %v, %m[%at] : memref<256xf32>
    return
  }
  func.func private @stage(%in: memref<256xf32>,
                           %sm: memref<8x8xf16, #gpu.address_space<workgroup>>,
                           %e: index) {
    %c8 = arith.constant 8 : index
    %r = arith.divui %e, %c8 : index
    %c = arith.remui %e, %c8 : index
    %v = memref.load %in[%e] : memref<256xf32>
    %h = arith.truncf %v : f32 to f16
    memref.store %h, %sm[%r, %c] : memref<8x8xf16, #gpu.address_space<workgroup>>
    return
  }
  func.func private @unpack(%out: memref<256xf32>, %v: vector<1x2xf16>, %at: index) {
    %lo = vector.extract %v[0, 0] : f16 from vector<1x2xf16>
    %hi = vector.extract %v[0, 1] : f16 from vector<1x2xf16>
    %lo32 = arith.extf %lo : f16 to f32
    %hi32 = arith.extf %hi : f16 to f32
    %c1 = arith.constant 1 : index
    %at1 = arith.addi %at, %c1 : index
    memref.store %lo32, %out[%at] : memref<256xf32>
    memref.store %hi32, %out[%at1] : memref<256xf32>
    return
  }
}
