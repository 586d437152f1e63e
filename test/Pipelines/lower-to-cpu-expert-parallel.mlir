// RUN: vmoe-opt %vmoe_src_root/examples/moe_layer.mlir --vmoe-lower-to-cpu="expert-parallel=2" | FileCheck %s
// RUN: vmoe-opt %vmoe_src_root/examples/moe_layer.mlir --vmoe-lower-to-cpu | FileCheck %s --check-prefix=ONE

// vmoe-lower-to-cpu{expert-parallel=2} on the example layer: the exchanges
// become calls of the MPI runtime through the C interface, the weights are
// sliced at the rank's experts, and the chain is not fused; without the
// option nothing of this appears.
// CHECK: llvm.call @vmoe_mpi_exchange_dispatch(
// CHECK: llvm.call @vmoe_mpi_rank()
// CHECK: llvm.call @vmoe_mpi_exchange_combine(
// CHECK-DAG: llvm.func @_mlir_ciface_vmoe_mpi_exchange_dispatch(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: llvm.func @_mlir_ciface_vmoe_mpi_exchange_combine(!llvm.ptr, !llvm.ptr, !llvm.ptr, !llvm.ptr, i64)
// CHECK-DAG: llvm.func @vmoe_mpi_rank() -> i64
// ONE-NOT: vmoe_mpi
