//===- BF16Panels.cpp - Expert weights as bf16 pair panels ----------------===//
//
// Part of the vmoe project, under the Apache License v2.0 with LLVM Exceptions.
//
//===----------------------------------------------------------------------===//
//
// The layout is the one vmoe.unpack_panels {storage = bf16_pairs} reads
// (docs/Dialect.md): column panels of width L whose rows are pairs of k,
// the operand layout of vdpbf16ps. Matrices are packed one after another;
// a packed matrix is never larger than the plain one (the compiler stores
// only such tensors as bf16), so matrix i is copied out before any packed
// word can overwrite it.
//
//===----------------------------------------------------------------------===//

#include "BF16Panels.h"

#include <algorithm>
#include <cstring>
#include <vector>

using namespace vmoe::runtime;

uint16_t vmoe::runtime::roundToBF16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) // NaN: keep it quiet.
    return static_cast<uint16_t>((bits >> 16) | 0x40u);
  bits += 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

int64_t vmoe::runtime::bf16PanelWords(const TensorInfo &tensor) {
  size_t rank = tensor.shape.size();
  int64_t k = tensor.shape[rank - 2], n = tensor.shape[rank - 1];
  int64_t l = tensor.panelWidth;
  int64_t matrices = k * n == 0 ? 0 : tensor.numElements / (k * n);
  return matrices * ((n + l - 1) / l) * l * ((k + 1) / 2);
}

void vmoe::runtime::packBF16Panels(float *data, const TensorInfo &tensor) {
  size_t rank = tensor.shape.size();
  int64_t k = tensor.shape[rank - 2], n = tensor.shape[rank - 1];
  int64_t l = tensor.panelWidth;
  int64_t matrix = k * n;
  if (matrix == 0)
    return;
  int64_t panels = (n + l - 1) / l, pairs = (k + 1) / 2;
  int64_t packedMatrix = panels * pairs * l;
  std::vector<float> plain(matrix);
  std::vector<uint32_t> packed(packedMatrix);
  int64_t matrices = tensor.numElements / matrix;
  for (int64_t i = 0; i < matrices; ++i) {
    std::copy_n(data + i * matrix, matrix, plain.begin());
    auto half = [&](int64_t row, int64_t column) -> uint32_t {
      if (row >= k || column >= n)
        return 0;
      return roundToBF16(plain[row * n + column]);
    };
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t j = 0; j < pairs; ++j)
        for (int64_t lane = 0; lane < l; ++lane) {
          int64_t column = p * l + lane;
          packed[(p * pairs + j) * l + lane] =
              half(2 * j, column) | half(2 * j + 1, column) << 16;
        }
    std::memcpy(data + i * packedMatrix, packed.data(),
                sizeof(uint32_t) * packedMatrix);
  }
  std::fill(data + matrices * packedMatrix, data + tensor.numElements, 0.0f);
}
