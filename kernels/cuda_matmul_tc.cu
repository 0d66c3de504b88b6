/* cuda_matmul_tc.cu — the "tensor" matmul mode (backend.h
 * kb_set_cuda_matmul): y[m, rows] = x[m, cols] · Wᵀ for bf16 weights on the
 * tensor cores, in one fixed order per output that depends on cols alone,
 * so batch invariance and greedy speculation on = off hold as in the
 * invariant mode (cuda_matmul.cu), with multi-row work (verify rows,
 * batched decode, prefill) at tensor-core rates instead of a CUDA-core fma
 * per weight element per row. f32 and f16 weights keep the invariant
 * mode's kernel.
 *
 * The activations stay f32: x is split into three bf16, x = hi + mid + lo
 * exactly (cuda_internal.cuh cu_split3), and each weight tile is
 * multiplied by the three, so every product the tensor cores form is
 * W·x exactly and the only new rounding is their accumulation (the cuBLAS
 * mode instead rounds x to bf16: up to 2⁻⁸ of each activation). Three
 * products per weight element cost nothing in decode, which is bound by
 * the weight's bytes, and 3× the tensor-core work in prefill, which still
 * leaves it far above the CUDA-core kernel's (a PREDICTION: no GPU has run
 * this file; see below).
 *
 * The order. A warp holds 16 weight rows (one m16n8k16 A tile) and NT
 * tiles of 8 x rows, over one part of k: the parts are cu_mm_parts(cols)
 * (about 512 columns each, as the invariant mode's), each a multiple of 32
 * columns long. In a part the warp walks blocks of 32 columns in increasing
 * k; a block is two mma.sync steps, columns {8t .. 8t + 3} (t = 0..3) then
 * {8t + 4 .. 8t + 7}, each as three accumulating products: lo, mid, hi.
 * The accumulator starts at zero in each part, and the parts' sums are
 * added in part order, ((p0 + p1) + p2) + ..., as mm_inv adds its. Column
 * c of the block feeds k-slot 2t + (c mod 2) + 8·((c mod 4) ≥ 2) of its
 * step (t = (c mod 32)/8): so lane 4g + t reads weight rows g and g + 8 as
 * one 16-byte load each, 8 consecutive bf16 a row, and those registers are
 * the A fragments of both steps as they stand (cuda_internal.cuh
 * cu_mma_bf16 gives the layout); x row g's 8 floats at the same columns
 * give its B fragments. A tensor-core output depends only on its own A row,
 * B column and accumulator, so an x row's result is the same in any of the
 * 8 slots of a tile, alone or beside any others: nothing of the order
 * depends on m, NT, the grid or the batch. Columns past cols (the last
 * block of a width not a multiple of 32) are zero in both operands.
 *
 * Where x is split. For m ≤ 16 each lane splits its own x elements as it
 * loads them (decode and verify: few rows, the split costs nothing beside
 * the weight's bytes). For more rows, a kernel of its own splits x once
 * into three bf16 arrays (CU_SCRATCH_XSPLIT) that every warp then loads:
 * otherwise each of a prefill's rows/16 weight tiles would split all of x
 * again. The split is a function of x alone, so both give the same bits.
 *
 * Numerics: the tensor cores' fp32 accumulation is not IEEE round to
 * nearest (Hopper aligns the products to the largest exponent and
 * truncates), so the results are neither the CPU's nor mm_inv's bits;
 * tests/test_cuda.c holds them to a bound from that model and checks exact
 * results where every partial sum is representable.
 *
 * Roofline — PREDICTIONS, no GPU has run this file. H200: ~990 TFLOP/s
 * dense bf16 (Hopper's mma.sync reaches well under wgmma's peak: count
 * ~300), 4.8 TB/s HBM. Decode, 0.6B's q projection (2,048 × 1,024, 4 MB):
 * 128 tiles × 2 parts = 256 warps, 16 KB of weight each; 6 mma a 32-column
 * block against 1 KB of weight, ~6 tensor cycles an SM against ~50 of
 * bandwidth: bound by the bytes like mm_inv. Verify of 8 rows: one n-tile,
 * the same launch, the x loads 8 floats a lane a block instead of mm_inv's
 * 8 rows × 8 floats a lane (the 8B shape's 1.48 verify ratio was those x
 * loads, bench/RECORD.md): predicted ≤ 1.05 of one row. Prefill, 2,048
 * rows of the 0.6B shape: 2 × 0.44 G weights × 2,048 × 3 = 5.4 TFLOP of
 * mma at ~300 TFLOP/s ≈ 18 ms; but x's three parts (6 bytes a column) are
 * loaded again for every block's 16–32 weight rows, and the weight for
 * every 32 x rows: ~8 GB a layer from L2 with 32 weight rows a block,
 * ~30 ms in all at ~7 TB/s, which bounds it; 8 warps a block (launch_tc)
 * share x's loads over 64 weight rows when L1 catches the siblings' loads:
 * ~5 GB, ~20 ms predicted. Against the invariant mode's ~230 ms of matmul (run 2's 4,970
 * tok/s with attention's share taken out). More weight tiles a warp would
 * reuse x's fragments from registers: not done. */
#include <stdio.h>
#include <string.h>

#include "cuda_matmul.cuh"

#define TC_MAX_WARPS CU_MM_MAX_WARPS

/* A lane's 8 consecutive bf16 of weight row `row` at [k, k + 8) as four
 * registers (two bf16 each, the lower column in the low half); columns at
 * or past end are zero. */
__device__ __forceinline__ uint4 tc_wload(const uint16_t *row, int k, int end, bool vec) {
    if (vec && k + 8 <= end) return *(const uint4 *)(row + k);
    uint32_t q[4] = {0, 0, 0, 0};
#pragma unroll
    for (int e = 0; e < 8; e++)
        if (k + e < end) q[e >> 1] |= (uint32_t)row[k + e] << (16 * (e & 1));
    uint4 u;
    u.x = q[0]; u.y = q[1]; u.z = q[2]; u.w = q[3];
    return u;
}

/* The B fragments of x row `xr` at columns [k, k + 8): b[s][st][reg], s the
 * split (0 lo, 1 mid, 2 hi), st the mma step (columns k..k+3, k+4..k+7).
 * Zero past end, and for a row past m (xr == NULL). PRE: from the three
 * split arrays (sp[s] + the row's offset); else split here. */
template <int PRE>
__device__ __forceinline__ void tc_xfrag(uint32_t b[3][2][2], const float *xr, const uint16_t *const *sp,
                                         size_t off, int k, int end, bool vec) {
    if (!xr) {
#pragma unroll
        for (int s = 0; s < 3; s++) b[s][0][0] = b[s][0][1] = b[s][1][0] = b[s][1][1] = 0;
        return;
    }
    if (PRE) {
#pragma unroll
        for (int s = 0; s < 3; s++) {
            const uint4 u = tc_wload(sp[s] + off, k, end, vec);
            b[s][0][0] = u.x; b[s][0][1] = u.y; b[s][1][0] = u.z; b[s][1][1] = u.w;
        }
        return;
    }
    float v[8];
    if (vec && k + 8 <= end) {
        const float4 a = ((const float4 *)(xr + k))[0], c = ((const float4 *)(xr + k))[1];
        v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w; v[4] = c.x; v[5] = c.y; v[6] = c.z; v[7] = c.w;
    } else {
#pragma unroll
        for (int e = 0; e < 8; e++) v[e] = k + e < end ? xr[k + e] : 0.0f;
    }
    uint32_t h[8], mi[8], lo[8];
#pragma unroll
    for (int e = 0; e < 8; e++) cu_split3(v[e], &h[e], &mi[e], &lo[e]);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        b[0][q >> 1][q & 1] = lo[2 * q] | lo[2 * q + 1] << 16;
        b[1][q >> 1][q & 1] = mi[2 * q] | mi[2 * q + 1] << 16;
        b[2][q >> 1][q & 1] = h[2 * q] | h[2 * q + 1] << 16;
    }
}

/* Block: nw parts × G weight tiles of warps (warp = g·nw + p); tile g holds
 * weight rows (blockIdx.x·G + g)·16 + [0, 16). blockIdx.y walks tiles of
 * 8·NT x rows. sp: the split arrays (PRE), hi at sp[2]. */
template <int NT, int PRE>
__global__ void __launch_bounds__(TC_MAX_WARPS * 32)
mm_tc(mm_set set, const float *__restrict__ x, const uint16_t *__restrict__ sp_lo, const uint16_t *__restrict__ sp_mid,
      const uint16_t *__restrict__ sp_hi, int m, int cols, int nw, int part, int vec_ok) {
    __shared__ float red[TC_MAX_WARPS][8 * NT][17];   /* [warp][x row][weight row], padded */
    const int bx = (int)blockIdx.x;
    const int t = (set.n > 1 && bx >= set.b0[1]) + (set.n > 2 && bx >= set.b0[2]) + (set.n > 3 && bx >= set.b0[3]);
    float *__restrict__ y = t == 0 ? set.y[0] : t == 1 ? set.y[1] : t == 2 ? set.y[2] : set.y[3];
    const uint16_t *__restrict__ w =
        (const uint16_t *)(t == 0 ? set.w[0] : t == 1 ? set.w[1] : t == 2 ? set.w[2] : set.w[3]);
    const int rows = t == 0 ? set.rows[0] : t == 1 ? set.rows[1] : t == 2 ? set.rows[2] : set.rows[3];
    const int blk = bx - (t == 0 ? 0 : t == 1 ? set.b0[1] : t == 2 ? set.b0[2] : set.b0[3]);
    const int lane = (int)threadIdx.x & 31, warp = (int)threadIdx.x >> 5;
    const int p = warp % nw, g = warp / nw, G = (int)blockDim.x / 32 / nw;
    const int o0 = (blk * G + g) * 16, gq = lane >> 2, tq = lane & 3;
    const int k0 = p * part, k1 = k0 + part < cols ? k0 + part : cols;
    const bool vec = vec_ok != 0;
    /* rows past the last load the last (every lane reaches every mma); not written */
    const int ra = o0 + gq < rows ? o0 + gq : rows - 1, rb = o0 + gq + 8 < rows ? o0 + gq + 8 : rows - 1;
    const uint16_t *wa = w + (size_t)ra * cols, *wb = w + (size_t)rb * cols;
    if (m <= 8 * NT)   /* one x tile: the weight is read once, start it towards L2 (PDL) */
        for (int k = k0 + 8 * tq; k < k1; k += 32) {
            cu_prefetch_l2(wa + k);
            cu_prefetch_l2(wb + k);
        }
    CU_PDL_ENTRY();
    const uint16_t *const sp[3] = {sp_lo, sp_mid, sp_hi};
    const int ntiles = (m + 8 * NT - 1) / (8 * NT);
    for (int tile = (int)blockIdx.y; tile < ntiles; tile += (int)gridDim.y) {
        const int i0 = tile * 8 * NT;
        float acc[NT][4];
#pragma unroll
        for (int n = 0; n < NT; n++) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
        /* every warp walks a whole part, the last part's blocks past cols on
         * zeros: they add exact zeros, cost no time (the block waits for its
         * longest warp), and keep the mma count the same in every warp, as
         * the emulator's block-wide stand-in for the warp collective needs */
#pragma unroll 2
        for (int kb = k0; kb < k0 + part; kb += 32) {
            const int k = kb + 8 * tq;
            const uint4 ua = tc_wload(wa, k, k1, vec), ub = tc_wload(wb, k, k1, vec);
            const uint32_t a0[4] = {ua.x, ub.x, ua.y, ub.y}, a1[4] = {ua.z, ub.z, ua.w, ub.w};
#pragma unroll
            for (int n = 0; n < NT; n++) {
                const int r = i0 + 8 * n + gq;
                uint32_t b[3][2][2];
                tc_xfrag<PRE>(b, r < m ? x + (size_t)r * cols : (const float *)0, sp, (size_t)r * cols, k, k1, vec);
#pragma unroll
                for (int s = 0; s < 3; s++) CU_MMA_BF16(acc[n], a0, b[s][0]);
#pragma unroll
                for (int s = 0; s < 3; s++) CU_MMA_BF16(acc[n], a1, b[s][1]);
            }
        }
#pragma unroll
        for (int n = 0; n < NT; n++)
#pragma unroll
            for (int e = 0; e < 4; e++) red[warp][8 * n + 2 * tq + (e & 1)][gq + 8 * (e >> 1)] = acc[n][e];
        __syncthreads();
        /* group g's first warp adds each output's parts in order */
        if (p == 0)
            for (int q = lane; q < 16 * 8 * NT; q += 32) {
                const int xr = q / 16, o = q % 16;
                if (i0 + xr < m && o0 + o < rows) {
                    float v = red[g * nw][xr][o];
                    for (int pp = 1; pp < nw; pp++) v = v + red[g * nw + pp][xr][o];
                    y[(size_t)(i0 + xr) * rows + o0 + o] = v;
                }
            }
        __syncthreads();   /* red is rewritten by the next tile */
    }
}

/* x [n] → its three bf16 parts (cu_split3), for PRE */
__global__ void tc_split_k(uint16_t *lo, uint16_t *mid, uint16_t *hi, const float *x, size_t n) {
    CU_PDL_ENTRY();
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        uint32_t h, mi, l;
        cu_split3(x[i], &h, &mi, &l);
        hi[i] = (uint16_t)h;
        mid[i] = (uint16_t)mi;
        lo[i] = (uint16_t)l;
    }
}

template <int NT, int PRE>
static void launch_tc(mm_set set, const float *x, const uint16_t *sp, int m, int cols, int vec) {
    const int nw = cu_mm_parts(cols);
    const int part = ((cols + nw - 1) / nw + 31) / 32 * 32;
    /* weight tiles a block: with many x rows (PRE) 8 warps a block, so that
     * x's fragments, the larger operand there, are read from L2 once for
     * 16·G weight rows (the sibling warps' loads hitting L1); with few, 4
     * warps, more blocks for the SMs. Neither changes an output's order. */
    const int warps = PRE ? TC_MAX_WARPS : 4;
    const int G = nw >= warps ? 1 : warps / nw;
    set.b0[0] = 0;
    for (int t = 0; t < set.n; t++) set.b0[t + 1] = set.b0[t] + (set.rows[t] + 16 * G - 1) / (16 * G);
    const unsigned gx = (unsigned)set.b0[set.n];
    const int ntiles = (m + 8 * NT - 1) / (8 * NT);
    int gy = (int)((1024 + gx - 1) / gx);   /* enough blocks for every SM several times over */
    gy = gy < ntiles ? gy : ntiles;
    gy = gy < 65535 ? gy : 65535;
    const size_t n = (size_t)m * cols;
    CU_LAUNCH((mm_tc<NT, PRE>), dim3(gx, (unsigned)gy), (unsigned)(32 * nw * G))(
        set, x, sp, sp ? sp + n : sp, sp ? sp + 2 * n : sp, m, cols, nw, part, vec);
}

void cuda_mm_tc_launch(mm_set set, const float *x, int m, int cols) {
    int vec = cols % 8 == 0 && ((uintptr_t)x & 15) == 0;
    for (int t = 0; t < set.n; t++) vec = vec && ((uintptr_t)set.w[t] & 15) == 0;
    /* NT from m: how many x tiles a warp holds, never the order */
    if (m <= 8) { launch_tc<1, 0>(set, x, NULL, m, cols, vec); return; }
    if (m <= 16) { launch_tc<2, 0>(set, x, NULL, m, cols, vec); return; }
    const size_t n = (size_t)m * cols;
    uint16_t *sp = (uint16_t *)cu_scratch(CU_SCRATCH_XSPLIT, 3 * n * sizeof(uint16_t));
    const unsigned blocks = (unsigned)((n + 255) / 256 < 4096 ? (n + 255) / 256 : 4096);
    CU_LAUNCH(tc_split_k, blocks, 256)(sp, sp + n, sp + 2 * n, x, n);
    launch_tc<4, 1>(set, x, sp, m, cols, vec);
}
