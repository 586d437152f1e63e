//===- Exchange.h - The all-to-all of expert parallel models ----*- C++ -*-===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The runtime ABI that convert-vmoe-to-mpi-runtime calls (docs/Distributed.md
// §4) and the per-layer traffic it counts for the report. Internal to
// lib/Runtime/MPI.
//
//===----------------------------------------------------------------------===//

#ifndef LIB_RUNTIME_MPI_EXCHANGE_H
#define LIB_RUNTIME_MPI_EXCHANGE_H

#include "../ModelInterface.h"

#include <cstdint>
#include <vector>

namespace vmoe::runtime::mpi {

/// Traffic of one MoE layer on this rank, summed over all calls.
struct LayerTraffic {
  /// Bytes of rows sent to / received from other ranks (both directions;
  /// rows a rank keeps for itself are not counted) and the fill counts.
  int64_t bytesSent = 0;
  int64_t bytesReceived = 0;
  /// Exchanges (two per layer and batch).
  int64_t exchanges = 0;
  /// Seconds inside MPI calls, and packing/unpacking rows.
  double mpiSeconds = 0;
  double copySeconds = 0;
};

/// The traffic per layer (index: the op's `layer`).
std::vector<LayerTraffic> &traffic();

/// Sets the rank and size the ABI uses (from MPI_COMM_WORLD).
void setWorld(int rank, int size);

} // namespace vmoe::runtime::mpi

using I32x3 = vmoe::runtime::MemRefDescriptor<int32_t, 3>;

extern "C" {
/// This process's MPI rank.
int64_t vmoe_mpi_rank(void);
/// vmoe.exchange_dispatch: input E x G x B x D, ids and slots G x S x k,
/// output E/R x R*G x B x D.
void _mlir_ciface_vmoe_mpi_exchange_dispatch(vmoe::runtime::F32x4 *input,
                                             I32x3 *ids, I32x3 *slots,
                                             vmoe::runtime::F32x4 *output,
                                             int64_t layer);
/// vmoe.exchange_combine: input E/R x R*G x B x D, output E x G x B x D.
void _mlir_ciface_vmoe_mpi_exchange_combine(vmoe::runtime::F32x4 *input,
                                            I32x3 *ids, I32x3 *slots,
                                            vmoe::runtime::F32x4 *output,
                                            int64_t layer);
}

#endif // LIB_RUNTIME_MPI_EXCHANGE_H
