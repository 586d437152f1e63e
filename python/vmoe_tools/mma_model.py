"""A lane-exact CPU model of the tensor-core GEMM kernel (GPUMmaGemm.cpp).

    python3 -m vmoe_tools.mma_model          # self-test, numpy only

The kernel cannot run without a GPU; this model runs its schedule on the
CPU with the same index arithmetic: per block a 64 x 64 tile of C, 4 warps
of 32 x 32, per warp 2 x 4 mma tiles of 16 x 8, A and B k tiles of 32
staged in shared memory under the kernel's XOR swizzle (16-byte chunk c of
row r stored at chunk c ^ s(r)), per lane the register fragments of
mma.sync m16n8k8 (TF32) or m16n8k16 (bf16) as the PTX ISA defines them,
read through the same swizzle, and the accumulator fragment scattered
back to C. An mma is modelled by rebuilding its A, B
and C matrices from the 32 lanes' registers (each element must be held by
exactly one lane), multiplying in float64 and rounding to float32. The
self-test checks:

- every fragment element is owned by exactly one (lane, register);
- the model equals a numpy GEMM on operands rounded as the kernel rounds
  them (TF32: to nearest, ties away from zero, 10 mantissa bits; bf16: to
  nearest even), for shapes with partial tiles and k not a multiple of 16;
- the swizzle is a permutation of each row's chunks (staging through it
  and reading back through it gives the right products: a collision would
  overwrite a chunk and break the GEMM check above);
- the fragment reads from shared memory are free of bank conflicts, per
  instruction as the hardware serves it: TF32 A with ldmatrix.x4 (each
  8 x 16-byte matrix one phase), bf16 A with 64-bit loads (a half-warp per
  phase), B with 32-bit loads (the warp in one phase).
"""

import sys

import numpy as np

TILE, STEP, WARPS = 64, 32, 4
TILES_M, TILES_N = 2, 4
K_MMA = {"tf32": 8, "bf16": 16}
# Most addresses one bank serves in one fragment load (1: conflict-free).
CONFLICT_BUDGET = {"tf32": 1, "bf16": 1}


def swizzle_a(mode, row, chunk):
    """Chunk where logical chunk `chunk` of staged A row `row` is stored."""
    return chunk ^ (row % 8 if mode == "tf32" else 2 * (row % 4))


def swizzle_b(mode, k, chunk):
    """Chunk where logical chunk `chunk` of staged B row `k` is stored."""
    return chunk ^ (2 * ((k if mode == "tf32" else k // 2) % 4))


def a_column(mode, row, col):
    return 4 * swizzle_a(mode, row, col // 4) + col % 4


def b_column(mode, k, col):
    return 4 * swizzle_b(mode, k, col // 4) + col % 4


def stage(tile, part, column):
    """Stores `part` (zero-padded to the tile) into `tile` through the
    swizzle `column(row, col)`; every physical place is written once."""
    written = np.zeros(tile.shape, dtype=bool)
    for r in range(tile.shape[0]):
        for c in range(tile.shape[1]):
            pc = column(r, c)
            assert not written[r, pc], "swizzle maps two chunks to one place"
            written[r, pc] = True
            inside = r < part.shape[0] and c < part.shape[1]
            tile[r, pc] = part[r, c] if inside else 0.0


def round_tf32(x):
    """cvt.rna.tf32.f32 as the kernel emits it: (bits + 0x1000) & ~0x1fff."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    bits = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    return bits.view(np.float32)


def round_bf16(x):
    """float32 -> bf16 (to nearest even) -> float32."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    bias = np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))
    bits = ((bits + bias) >> np.uint64(16)) << np.uint64(16)
    return bits.astype(np.uint32).view(np.float32)


def a_fragment(mode, lane, ks):
    """[(register, element, row, k)] of lane's A fragment (tile-relative)."""
    g, t = lane // 4, lane % 4
    if mode == "tf32":
        return [(0, 0, g, ks + t), (1, 0, g + 8, ks + t),
                (2, 0, g, ks + t + 4), (3, 0, g + 8, ks + t + 4)]
    out = []
    for i in range(4):
        for e in range(2):
            out.append((i, e, g + 8 * (i % 2), ks + 2 * t + 8 * (i // 2) + e))
    return out


def b_fragment(mode, lane, ks):
    """[(register, element, k, col)] of lane's B fragment."""
    g, t = lane // 4, lane % 4
    if mode == "tf32":
        return [(0, 0, ks + t, g), (1, 0, ks + t + 4, g)]
    return [(j, e, ks + 2 * t + 8 * j + e, g) for j in range(2)
            for e in range(2)]


def c_fragment(lane):
    """[(register, row, col)] of lane's accumulator fragment."""
    g, t = lane // 4, lane % 4
    return [(e, g + 8 * (e // 2), 2 * t + e % 2) for e in range(4)]


def mma(mode, a_regs, b_regs, c_regs, ks):
    """One warp-wide mma: registers per lane in, registers per lane out."""
    k = K_MMA[mode]
    A = np.full((16, k), np.nan)
    B = np.full((k, 8), np.nan)
    C = np.full((16, 8), np.nan)
    for lane in range(32):
        for r, e, row, kk in a_fragment(mode, lane, ks):
            assert np.isnan(A[row, kk - ks]), "A element held twice"
            A[row, kk - ks] = a_regs[lane][(r, e)]
        for r, e, kk, col in b_fragment(mode, lane, ks):
            assert np.isnan(B[kk - ks, col]), "B element held twice"
            B[kk - ks, col] = b_regs[lane][(r, e)]
        for r, row, col in c_fragment(lane):
            assert np.isnan(C[row, col]), "C element held twice"
            C[row, col] = c_regs[lane][r]
    for name, m in (("A", A), ("B", B), ("C", C)):
        assert not np.isnan(m).any(), f"{name} element held by no lane"
    D = (A @ B + C).astype(np.float32)
    return [[D[row, col] for _, row, col in c_fragment(lane)]
            for lane in range(32)]


def gemm(mode, a, b):
    """C = A B with the kernel's schedule; a [M, K], b [K, N] float32."""
    m, kdim = a.shape
    n = b.shape[1]
    rnd = round_tf32 if mode == "tf32" else round_bf16
    c = np.zeros((m, n), dtype=np.float32)
    for row_base in range(0, m, TILE):
        for col_base in range(0, n, TILE):
            acc = np.zeros((WARPS, 32, TILES_M * TILES_N * 4), np.float32)
            for k0 in range(0, kdim, STEP):
                # Staging (zero outside the matrices), swizzled rows.
                a_tile = np.full((TILE, STEP), np.nan, np.float32)
                b_tile = np.full((STEP, TILE), np.nan, np.float32)
                stage(a_tile, a[row_base:row_base + TILE, k0:k0 + STEP],
                      lambda r, c: a_column(mode, r, c))
                stage(b_tile, b[k0:k0 + STEP, col_base:col_base + TILE],
                      lambda r, c: b_column(mode, r, c))
                # The kernel rounds each value as it builds a fragment.
                a_tile, b_tile = rnd(a_tile), rnd(b_tile)
                for w in range(WARPS):
                    wr, wc = 32 * (w // 2), 32 * (w % 2)
                    for ks in range(0, STEP, K_MMA[mode]):
                        for mi in range(TILES_M):
                            a_regs = [{(r, e): a_tile[
                                wr + 16 * mi + row,
                                a_column(mode, wr + 16 * mi + row, kk)]
                                       for r, e, row, kk in
                                       a_fragment(mode, lane, ks)}
                                      for lane in range(32)]
                            for ni in range(TILES_N):
                                b_regs = [{(r, e): b_tile[
                                    kk, b_column(mode, kk, wc + 8 * ni + col)]
                                           for r, e, kk, col in
                                           b_fragment(mode, lane, ks)}
                                          for lane in range(32)]
                                base = (mi * TILES_N + ni) * 4
                                c_regs = [acc[w, lane, base:base + 4]
                                          for lane in range(32)]
                                d = mma(mode, a_regs, b_regs, c_regs, ks)
                                for lane in range(32):
                                    acc[w, lane, base:base + 4] = d[lane]
            for w in range(WARPS):
                wr, wc = 32 * (w // 2), 32 * (w % 2)
                for lane in range(32):
                    for mi in range(TILES_M):
                        for ni in range(TILES_N):
                            base = (mi * TILES_N + ni) * 4
                            for r, row, col in c_fragment(lane):
                                gr = row_base + wr + 16 * mi + row
                                gc = col_base + wc + 8 * ni + col
                                if gr < m and gc < n:
                                    c[gr, gc] = acc[w, lane, base + r]
    return c


def ldmatrix_rows(lane, ks):
    """The A row (within a 16-row mma tile) and k whose address lane gives
    to ldmatrix.x4 for the TF32 fragment at k offset ks."""
    return lane % 8 + 8 * ((lane // 8) % 2), ks + 4 * (lane // 16)


def bank_conflicts(mode):
    """Largest number of distinct 32-bit words one bank serves in one phase
    of a fragment load of any warp (1: conflict-free). Words are physical
    (swizzled) offsets in the staged tiles."""
    phases = []
    for w in range(WARPS):
        wr, wc = 32 * (w // 2), 32 * (w % 2)
        for ks in range(0, STEP, K_MMA[mode]):
            for mi in range(TILES_M):
                if mode == "tf32":
                    # ldmatrix.x4: matrix j is one phase, rows from lanes
                    # 8j .. 8j + 7, 16 bytes (4 words) each.
                    for j in range(4):
                        words = []
                        for lane in range(8 * j, 8 * j + 8):
                            row, kk = ldmatrix_rows(lane, ks)
                            row += wr + 16 * mi
                            col = a_column(mode, row, kk)
                            assert col % 4 == 0, "ldmatrix row not 16-byte aligned"
                            words += [row * STEP + col + i for i in range(4)]
                        phases.append(words)
                else:
                    # 64-bit loads: a half-warp per phase.
                    for reg in range(4):
                        for half in (0, 1):
                            words = []
                            for lane in range(16 * half, 16 * half + 16):
                                pairs = [(row, kk) for r, e, row, kk in
                                         a_fragment(mode, lane, ks) if r == reg]
                                (row, kk), (_, kk1) = pairs
                                row += wr + 16 * mi
                                col = a_column(mode, row, kk)
                                assert a_column(mode, row, kk1) == col + 1
                                assert col % 2 == 0, "pair not 8-byte aligned"
                                words += [row * STEP + col, row * STEP + col + 1]
                            phases.append(words)
            for ni in range(TILES_N):
                by_slot = {}
                for lane in range(32):
                    for r, e, kk, col in b_fragment(mode, lane, ks):
                        col += wc + 8 * ni
                        by_slot.setdefault((r, e), []).append(
                            kk * TILE + b_column(mode, kk, col))
                phases += list(by_slot.values())
    worst = 1
    for words in phases:
        banks = {}
        for word in set(words):
            banks.setdefault(word % 32, set()).add(word)
        worst = max(worst, max(len(v) for v in banks.values()))
    return worst


def main():
    rng = np.random.default_rng(0)
    passed = failed = 0
    for mode in ("tf32", "bf16"):
        rnd = round_tf32 if mode == "tf32" else round_bf16
        for m, n, k in ((64, 64, 32), (70, 40, 24), (5, 130, 70)):
            a = rng.standard_normal((m, k)).astype(np.float32)
            b = rng.standard_normal((k, n)).astype(np.float32)
            got = gemm(mode, a, b)
            want = (rnd(a).astype(np.float64) @ rnd(b).astype(np.float64))
            err = np.abs(got - want).max() / np.abs(want).max()
            ok = err < 1e-6
            print(f"{'PASS' if ok else 'FAIL'} {mode} gemm {m}x{n}x{k}: "
                  f"max rel err {err:.1e} vs numpy on rounded operands")
            passed, failed = passed + ok, failed + (not ok)
        conflicts = bank_conflicts(mode)
        budget = CONFLICT_BUDGET[mode]
        ok = conflicts <= budget
        print(f"{'PASS' if ok else 'FAIL'} {mode} fragment loads: "
              f"{conflicts}-way bank conflicts at most (budget {budget})")
        passed, failed = passed + ok, failed + (not ok)
    print(f"vmoe_tools.mma_model: {passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
