//===- Exchange.cpp - The all-to-all of expert parallel models ------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// vmoe.exchange_dispatch / vmoe.exchange_combine over MPI_COMM_WORLD. Each
// exchange first computes this rank's filled rows per (expert, group) from
// its routing (kept choices: slot >= 0), swaps those counts with
// MPI_Alltoall (the owner of expert e learns how many rows of each group
// of each rank it gets), then moves only the filled rows with
// MPI_Alltoallv in units of one row (an MPI contiguous type of D floats).
// Unfilled rows of the result are zero. Both directions recompute the
// counts, so the two calls share no state; the counts cost E * G ints.
//
//===----------------------------------------------------------------------===//

#include "Exchange.h"

#include "../Distributed.h"

#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

using namespace vmoe::runtime;
using namespace vmoe::runtime::mpi;

static int worldRank = 0;
static int worldSize = 1;

std::vector<LayerTraffic> &mpi::traffic() {
  static std::vector<LayerTraffic> layers;
  return layers;
}

void mpi::setWorld(int rank, int size) {
  worldRank = rank;
  worldSize = size;
}

int64_t vmoe_mpi_rank(void) { return worldRank; }

/// Ends every rank: an exchange cannot continue on one rank alone. The
/// line is one write, as every error line of a rank (Distributed.h).
[[noreturn]] static void abortAll(const std::string &message) {
  printErrorLine(message);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

/// Whether `desc` is row-major and contiguous.
template <typename T, int Rank>
static bool contiguous(const MemRefDescriptor<T, Rank> &desc) {
  int64_t stride = 1;
  for (int dim = Rank - 1; dim >= 0; --dim) {
    if (desc.sizes[dim] != 1 && desc.strides[dim] != stride)
      return false;
    stride *= desc.sizes[dim];
  }
  return true;
}

/// fill[e * G + g]: the filled rows of expert e in group g of this rank.
static std::vector<int32_t> fillCounts(const I32x3 &ids, const I32x3 &slots,
                                       int64_t experts) {
  int64_t groups = ids.sizes[0], tokens = ids.sizes[1], k = ids.sizes[2];
  std::vector<int32_t> fill(experts * groups, 0);
  const int32_t *idData = ids.aligned + ids.offset;
  const int32_t *slotData = slots.aligned + slots.offset;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t i = 0; i < k; ++i) {
        int64_t at = g * ids.strides[0] + t * ids.strides[1] +
                     i * ids.strides[2];
        int32_t slot = slotData[g * slots.strides[0] + t * slots.strides[1] +
                                i * slots.strides[2]];
        if (slot < 0)
          continue;
        int32_t expert = idData[at];
        if (expert < 0 || expert >= experts)
          abortAll("expert id " + std::to_string(expert) + " out of range");
        int32_t &count = fill[expert * groups + g];
        count = std::max(count, slot + 1);
      }
  return fill;
}

namespace {
/// One exchange: the counts known on both sides and the MPI row type.
struct Plan {
  int64_t experts, local, groups, capacity, width;
  /// fill[e * G + g] of this rank (token side).
  std::vector<int32_t> fill;
  /// remote[p * local * G + j * G + g]: rows of group g of rank p for the
  /// local expert j (expert side).
  std::vector<int32_t> remote;
  MPI_Datatype row;
};
} // namespace

static double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Counts of both sides; `tokenSide` is E x G x B x D.
static Plan plan(const F32x4 &tokenSide, const I32x3 &ids, const I32x3 &slots,
                 LayerTraffic &stats) {
  Plan p;
  p.experts = tokenSide.sizes[0];
  p.groups = tokenSide.sizes[1];
  p.capacity = tokenSide.sizes[2];
  p.width = tokenSide.sizes[3];
  if (p.experts % worldSize != 0)
    abortAll(std::to_string(p.experts) + " experts are not divisible by " +
             std::to_string(worldSize) + " ranks (the model was compiled "
             "for another -np)");
  if (ids.sizes[0] != p.groups)
    abortAll("routing has " + std::to_string(ids.sizes[0]) +
             " groups, buffers " + std::to_string(p.groups));
  p.local = p.experts / worldSize;
  p.fill = fillCounts(ids, slots, p.experts);
  p.remote.assign(p.fill.size(), 0);
  int count = static_cast<int>(p.local * p.groups);
  double start = now();
  // fill is expert-major: the block of rank q is contiguous.
  MPI_Alltoall(p.fill.data(), count, MPI_INT32_T, p.remote.data(), count,
               MPI_INT32_T, MPI_COMM_WORLD);
  stats.mpiSeconds += now() - start;
  int64_t countBytes = static_cast<int64_t>(count) * 4 * (worldSize - 1);
  stats.bytesSent += countBytes;
  stats.bytesReceived += countBytes;
  MPI_Type_contiguous(static_cast<int>(p.width), MPI_FLOAT, &p.row);
  MPI_Type_commit(&p.row);
  return p;
}

/// Moves rows: `sendRows[q]` rows to rank q, `recvRows[p]` from rank p,
/// packed by `pack(q, out)` and unpacked by `unpack(p, in)`.
template <typename Pack, typename Unpack>
static void moveRows(Plan &p, const std::vector<int> &sendRows,
                     const std::vector<int> &recvRows, Pack pack,
                     Unpack unpack, LayerTraffic &stats) {
  std::vector<int> sendOffsets(worldSize, 0), recvOffsets(worldSize, 0);
  int64_t sendTotal = 0, recvTotal = 0;
  for (int q = 0; q < worldSize; ++q) {
    sendOffsets[q] = static_cast<int>(sendTotal);
    recvOffsets[q] = static_cast<int>(recvTotal);
    sendTotal += sendRows[q];
    recvTotal += recvRows[q];
    if (q != worldRank) {
      stats.bytesSent += int64_t(sendRows[q]) * p.width * 4;
      stats.bytesReceived += int64_t(recvRows[q]) * p.width * 4;
    }
  }
  if (sendTotal > INT32_MAX || recvTotal > INT32_MAX)
    abortAll("an exchange of more than 2^31 rows");
  double start = now();
  std::vector<float> sendBuffer(sendTotal * p.width),
      recvBuffer(recvTotal * p.width);
  for (int q = 0; q < worldSize; ++q)
    pack(q, sendBuffer.data() + int64_t(sendOffsets[q]) * p.width);
  double packed = now();
  MPI_Alltoallv(sendBuffer.data(), sendRows.data(), sendOffsets.data(), p.row,
                recvBuffer.data(), recvRows.data(), recvOffsets.data(), p.row,
                MPI_COMM_WORLD);
  double moved = now();
  for (int q = 0; q < worldSize; ++q)
    unpack(q, recvBuffer.data() + int64_t(recvOffsets[q]) * p.width);
  stats.copySeconds += (packed - start) + (now() - moved);
  stats.mpiSeconds += moved - packed;
  MPI_Type_free(&p.row);
}

/// The traffic record of `layer`.
static LayerTraffic &layerStats(int64_t layer) {
  std::vector<LayerTraffic> &layers = traffic();
  if (layer < 0 || layer > 1 << 20)
    abortAll("bad layer number " + std::to_string(layer));
  if (static_cast<size_t>(layer) >= layers.size())
    layers.resize(layer + 1);
  return layers[layer];
}

/// Copies `count` floats; none when count is 0, where the buffer of a rank
/// with nothing to send may be null (memcpy's arguments must not be).
static void copyRows(float *to, const float *from, int64_t count) {
  if (count > 0)
    std::memcpy(to, from, count * sizeof(float));
}

/// Checks the descriptors of one exchange.
static void checkLayout(const F32x4 &a, const F32x4 &b, const I32x3 &ids,
                        const I32x3 &slots) {
  if (!contiguous(a) || !contiguous(b))
    abortAll("exchange buffers must be contiguous");
  for (int dim = 0; dim < 3; ++dim)
    if (ids.sizes[dim] != slots.sizes[dim])
      abortAll("expert ids and slots differ in shape");
}

void _mlir_ciface_vmoe_mpi_exchange_dispatch(F32x4 *input, I32x3 *ids,
                                             I32x3 *slots, F32x4 *output,
                                             int64_t layer) {
  checkLayout(*input, *output, *ids, *slots);
  LayerTraffic &stats = layerStats(layer);
  ++stats.exchanges;
  Plan p = plan(*input, *ids, *slots, stats);
  int64_t l = p.local, g = p.groups, b = p.capacity, d = p.width;
  if (output->sizes[0] != l || output->sizes[1] != worldSize * g ||
      output->sizes[2] != b || output->sizes[3] != d)
    abortAll("exchange_dispatch output has the wrong shape");
  const float *in = input->aligned + input->offset;
  float *out = output->aligned + output->offset;
  std::fill_n(out, l * worldSize * g * b * d, 0.0f);
  std::vector<int> sendRows(worldSize, 0), recvRows(worldSize, 0);
  for (int q = 0; q < worldSize; ++q)
    for (int64_t i = 0; i < l * g; ++i) {
      sendRows[q] += p.fill[q * l * g + i];
      recvRows[q] += p.remote[q * l * g + i];
    }
  moveRows(
      p, sendRows, recvRows,
      [&](int q, float *to) {
        for (int64_t j = 0; j < l; ++j)
          for (int64_t gi = 0; gi < g; ++gi) {
            int64_t e = q * l + j, rows = p.fill[e * g + gi];
            copyRows(to, in + (e * g + gi) * b * d, rows * d);
            to += rows * d;
          }
      },
      [&](int from, const float *rowsIn) {
        for (int64_t j = 0; j < l; ++j)
          for (int64_t gi = 0; gi < g; ++gi) {
            int64_t rows = p.remote[(from * l + j) * g + gi];
            copyRows(out + (j * worldSize * g + from * g + gi) * b * d,
                     rowsIn, rows * d);
            rowsIn += rows * d;
          }
      },
      stats);
}

void _mlir_ciface_vmoe_mpi_exchange_combine(F32x4 *input, I32x3 *ids,
                                            I32x3 *slots, F32x4 *output,
                                            int64_t layer) {
  checkLayout(*input, *output, *ids, *slots);
  LayerTraffic &stats = layerStats(layer);
  ++stats.exchanges;
  Plan p = plan(*output, *ids, *slots, stats);
  int64_t l = p.local, g = p.groups, b = p.capacity, d = p.width;
  if (input->sizes[0] != l || input->sizes[1] != worldSize * g ||
      input->sizes[2] != b || input->sizes[3] != d)
    abortAll("exchange_combine input has the wrong shape");
  const float *in = input->aligned + input->offset;
  float *out = output->aligned + output->offset;
  std::fill_n(out, p.experts * g * b * d, 0.0f);
  // The reverse of dispatch: the owner sends what it received.
  std::vector<int> sendRows(worldSize, 0), recvRows(worldSize, 0);
  for (int q = 0; q < worldSize; ++q)
    for (int64_t i = 0; i < l * g; ++i) {
      sendRows[q] += p.remote[q * l * g + i];
      recvRows[q] += p.fill[q * l * g + i];
    }
  moveRows(
      p, sendRows, recvRows,
      [&](int to, float *rowsOut) {
        for (int64_t j = 0; j < l; ++j)
          for (int64_t gi = 0; gi < g; ++gi) {
            int64_t rows = p.remote[(to * l + j) * g + gi];
            copyRows(rowsOut, in + (j * worldSize * g + to * g + gi) * b * d,
                     rows * d);
            rowsOut += rows * d;
          }
      },
      [&](int from, const float *rowsIn) {
        for (int64_t j = 0; j < l; ++j)
          for (int64_t gi = 0; gi < g; ++gi) {
            int64_t e = from * l + j, rows = p.fill[e * g + gi];
            copyRows(out + (e * g + gi) * b * d, rowsIn, rows * d);
            rowsIn += rows * d;
          }
      },
      stats);
}
