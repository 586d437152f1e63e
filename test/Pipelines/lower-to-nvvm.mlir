// REQUIRES: ptxas
// RUN: vmoe-opt %s --vmoe-lower-to-nvvm | FileCheck %s --check-prefix=CUBIN
// RUN: vmoe-opt %s --vmoe-lower-to-nvvm="chip=sm_80" | FileCheck %s --check-prefix=SM80
// RUN: vmoe-opt %s --vmoe-lower-to-nvvm="format=isa" | FileCheck %s --check-prefix=PTX
// RUN: vmoe-opt %s --vmoe-lower-to-nvvm | mlir-translate --mlir-to-llvmir | FileCheck %s --check-prefix=HOST

// A whole MoE layer through the GPU pipeline: kernels assembled by the
// toolkit's ptxas into cubins for sm_90 (and sm_80), PTX on request, and
// host code that loads the modules and launches the kernels through the
// mgpu runtime ABI (lib/Runtime/CUDA).

// CUBIN: gpu.binary @moe_layer_kernel [#gpu.object<#nvvm.target<O = 3, chip = "sm_90">, {{.*}}bin = "\7FELF
// CUBIN-NOT: vmoe.
// SM80: #nvvm.target<O = 3, chip = "sm_80">
// PTX: gpu.binary {{.*}}assembly = "{{.*}}.target sm_90
// HOST-DAG: call ptr @mgpuModuleLoad(
// HOST-DAG: call void @mgpuLaunchKernel(
// HOST-DAG: call ptr @mgpuMemAlloc(
// HOST-DAG: call void @mgpuMemFree(

func.func @moe_layer(%x: tensor<1x16x8xf32>, %router: tensor<8x4xf32>, %w1: tensor<4x8x16xf32>,
    %b1: tensor<4x16xf32>, %w2: tensor<4x16x8xf32>, %b2: tensor<4x8xf32>, %out: memref<1x16x8xf32>)
    attributes {llvm.emit_c_interface} {
  %g, %ids, %w = vmoe.route %x, %router {k = 2 : i64}
      : tensor<1x16x8xf32>, tensor<8x4xf32> -> tensor<1x16x4xf32>, tensor<1x16x2xi32>, tensor<1x16x2xf32>
  %o = vmoe.bpr_sort %g : tensor<1x16x4xf32> -> tensor<1x16xi32>
  %buf, %slots = vmoe.dispatch %x, %ids, %o {capacity_ratio = 1.0 : f64}
      : tensor<1x16x8xf32>, tensor<1x16x2xi32>, tensor<1x16xi32> -> tensor<4x1x?x8xf32>, tensor<1x16x2xi32>
  %y = vmoe.expert_ffn %buf, %w1, %b1, %w2, %b2
      : tensor<4x1x?x8xf32>, tensor<4x8x16xf32>, tensor<4x16xf32>, tensor<4x16x8xf32>, tensor<4x8xf32>
  %r = vmoe.combine %y, %ids, %slots, %w
      : tensor<4x1x?x8xf32>, tensor<1x16x2xi32>, tensor<1x16x2xi32>, tensor<1x16x2xf32> -> tensor<1x16x8xf32>
  bufferization.materialize_in_destination %r in restrict writable %out
      : (tensor<1x16x8xf32>, memref<1x16x8xf32>) -> ()
  return
}
