/*
 * pipeplan.runtime.kernels._qkernels: matrix-vector products on GGUF-quantized weights, CPU.
 *
 * The weight rows stay in their ggml block format (read in place from the mapped file). The
 * activation rows are quantized to the weight type's "vec_dot_type" first and every output element
 * is an integer dot product per block times the block scales, accumulated in float32: the
 * arithmetic of ggml's CPU backend (ggml/src/ggml-cpu/quants.c, arch/x86/quants.c,
 * ggml_vec_dot_<type>_q8_<x>, quantize_row_q8_0/q8_1/q8_K). Written for pipeplan from the block
 * layouts of ggml-common.h; no ggml code is copied.
 *
 *   weight type   vec_dot_type   block (weights, bytes)
 *   F16           F16            1, 2
 *   BF16          BF16           1, 2
 *   Q4_0          Q8_0           32, 18        Q4_1  Q8_1  32, 20
 *   Q5_0          Q8_0           32, 22        Q5_1  Q8_1  32, 24
 *   Q8_0          Q8_0           32, 34
 *   Q4_K          Q8_K           256, 144      Q5_K  Q8_K  256, 176     Q6_K  Q8_K  256, 210
 *
 * Two code paths with the same integer results: AVX2+FMA+F16C (chosen at run time when the CPU has
 * them; the lane layout of the float accumulators follows ggml's AVX2 kernels) and portable C. With
 * several activation rows the AVX2 path unpacks each weight block once for up to NYMAX rows, keeping
 * every row's arithmetic as in the one-row kernel.
 * The portable activation quantizers reproduce ggml's x86 (AVX2) ones, not its scalar reference:
 * Q8_0/Q8_1 use id = 127/amax and round half to even.
 *
 * Python API (all buffers C-contiguous; sizes are checked, errors are ValueError):
 *   mul_mat(w, wtype, n, k, x, out, n_threads=1, ubatch=T)   out[t, r] = dot(w row r, x row t); ubatch 1 with
 *                                                 T > 1 rows: every row as a one-row micro-batch
 *   get_rows(w, wtype, k, ids, out)                 out[i] = dequantized row ids[i]
 *   quantize_act(x, wtype, k, out)                  activation rows as vec_dot_type blocks
 *   row_bytes(type, k), vec_dot_type(wtype), types(), set_simd(on) -> previous, simd() -> bool,
 *   cpu_has_avx2() -> bool
 */
#include "qk_common.h"

static inline void scale_min_k4(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63; *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
    }
}

/* ------------------------------------------------------------------ activation quantizers (portable) */
static void quant_q8_0_c(const float *x, void *vy, int k) {
    blk_q8_0 *y = vy;
    for (int i = 0; i < k / QK; i++, x += QK) {
        float amax = 0.f;
        for (int j = 0; j < QK; j++) { const float a = fabsf(x[j]); amax = a > amax ? a : amax; }
        const float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
        y[i].d = f2h(d);
        for (int j = 0; j < QK; j++) y[i].qs[j] = (int8_t)nearest_int(x[j] * id);
    }
}

static void quant_q8_1_c(const float *x, void *vy, int k) {
    blk_q8_1 *y = vy;
    for (int i = 0; i < k / QK; i++, x += QK) {
        float amax = 0.f;
        for (int j = 0; j < QK; j++) { const float a = fabsf(x[j]); amax = a > amax ? a : amax; }
        const float d = amax / 127.f, id = amax != 0.f ? 127.f / amax : 0.f;
        int sum = 0;
        y[i].d = f2h(d);
        for (int j = 0; j < QK; j++) { const int v = nearest_int(x[j] * id); y[i].qs[j] = (int8_t)v; sum += v; }
        y[i].s = f2h(d * (float)sum);
    }
}

static void quant_q8_K_c(const float *x, void *vy, int k) {   /* quantize_row_q8_K_ref */
    blk_q8_K *y = vy;
    for (int i = 0; i < k / QKK; i++, x += QKK) {
        float amax = 0.f, max = 0.f;
        for (int j = 0; j < QKK; j++) { const float a = fabsf(x[j]); if (a > amax) { amax = a; max = x[j]; } }
        if (amax == 0.f) { memset(&y[i], 0, sizeof(y[i])); continue; }
        const float iscale = -127.f / max;
        for (int j = 0; j < QKK; j++) { const int v = nearest_int(iscale * x[j]); y[i].qs[j] = (int8_t)(v < 127 ? v : 127); }
        for (int j = 0; j < QKK / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.f / iscale;
    }
}

static void quant_f16_c(const float *x, void *vy, int k) { half_t *y = vy; for (int i = 0; i < k; i++) y[i] = f2h(x[i]); }
static void quant_bf16_c(const float *x, void *vy, int k) { uint16_t *y = vy; for (int i = 0; i < k; i++) y[i] = f2bf(x[i]); }

/* ------------------------------------------------------------------ dot products (portable) */
static float dot_f16_c(int n, const void *vx, const void *vy) {
    const half_t *x = vx, *y = vy;
    double s = 0.0;
    for (int i = 0; i < n; i++) s += (double)(h2f(ld_h(x + i)) * h2f(ld_h(y + i)));
    return (float)s;
}

static float dot_bf16_c(int n, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    double s = 0.0;
    for (int i = 0; i < n; i++) { uint16_t a, b; memcpy(&a, x + i, 2); memcpy(&b, y + i, 2); s += (double)(bf2f(a) * bf2f(b)); }
    return (float)s;
}

static float dot_q4_0_c(int n, const void *vx, const void *vy) {
    const blk_q4_0 *x = vx; const blk_q8_0 *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QK; i++) {
        int si = 0;
        for (int j = 0; j < QK / 2; j++)
            si += ((x[i].qs[j] & 0xF) - 8) * y[i].qs[j] + ((x[i].qs[j] >> 4) - 8) * y[i].qs[j + QK / 2];
        s += (float)si * (h2f(ld_h(&x[i].d)) * h2f(ld_h(&y[i].d)));
    }
    return s;
}

static float dot_q4_1_c(int n, const void *vx, const void *vy) {
    const blk_q4_1 *x = vx; const blk_q8_1 *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QK; i++) {
        int si = 0;
        for (int j = 0; j < QK / 2; j++) si += (x[i].qs[j] & 0xF) * y[i].qs[j] + (x[i].qs[j] >> 4) * y[i].qs[j + QK / 2];
        s += (h2f(ld_h(&x[i].d)) * h2f(ld_h(&y[i].d))) * (float)si + h2f(ld_h(&x[i].m)) * h2f(ld_h(&y[i].s));
    }
    return s;
}

static inline uint32_t ld_u32(const uint8_t *p) { uint32_t u; memcpy(&u, p, 4); return u; }

static float dot_q5_0_c(int n, const void *vx, const void *vy) {
    const blk_q5_0 *x = vx; const blk_q8_0 *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QK; i++) {
        const uint32_t qh = ld_u32(x[i].qh);
        int si = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            si += (((x[i].qs[j] & 0xF) | h0) - 16) * y[i].qs[j] + (((x[i].qs[j] >> 4) | h1) - 16) * y[i].qs[j + QK / 2];
        }
        s += (float)si * (h2f(ld_h(&x[i].d)) * h2f(ld_h(&y[i].d)));
    }
    return s;
}

static float dot_q5_1_c(int n, const void *vx, const void *vy) {
    const blk_q5_1 *x = vx; const blk_q8_1 *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QK; i++) {
        const uint32_t qh = ld_u32(x[i].qh);
        int si = 0;
        for (int j = 0; j < QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            si += ((x[i].qs[j] & 0xF) | h0) * y[i].qs[j] + ((x[i].qs[j] >> 4) | h1) * y[i].qs[j + QK / 2];
        }
        s += (h2f(ld_h(&x[i].d)) * h2f(ld_h(&y[i].d))) * (float)si + h2f(ld_h(&x[i].m)) * h2f(ld_h(&y[i].s));
    }
    return s;
}

static float dot_q8_0_c(int n, const void *vx, const void *vy) {
    const blk_q8_0 *x = vx; const blk_q8_0 *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QK; i++) {
        int si = 0;
        for (int j = 0; j < QK; j++) si += x[i].qs[j] * y[i].qs[j];
        s += (float)si * (h2f(ld_h(&x[i].d)) * h2f(ld_h(&y[i].d)));
    }
    return s;
}

static float dot_q4_K_c(int n, const void *vx, const void *vy) {
    const blk_q4_K *x = vx; const blk_q8_K *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f(ld_h(&x[i].d)), dmin = y[i].d * h2f(ld_h(&x[i].dmin));
        const uint8_t *q = x[i].qs; const int8_t *a = y[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < QKK / 64; j++) {
            uint8_t sc0, m0, sc1, m1;
            scale_min_k4(2 * j, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * j + 1, x[i].scales, &sc1, &m1);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) { lo += (q[l] & 0xF) * a[l]; hi += (q[l] >> 4) * a[l + 32]; }
            sumi += sc0 * lo + sc1 * hi;
            summ += m0 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) + m1 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
            q += 32; a += 64;
        }
        s += d * (float)sumi - dmin * (float)summ;
    }
    return s;
}

static float dot_q5_K_c(int n, const void *vx, const void *vy) {
    const blk_q5_K *x = vx; const blk_q8_K *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f(ld_h(&x[i].d)), dmin = y[i].d * h2f(ld_h(&x[i].dmin));
        const uint8_t *q = x[i].qs, *qh = x[i].qh; const int8_t *a = y[i].qs;
        int sumi = 0, summ = 0;
        for (int j = 0; j < QKK / 64; j++) {
            uint8_t sc0, m0, sc1, m1;
            scale_min_k4(2 * j, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * j + 1, x[i].scales, &sc1, &m1);
            int lo = 0, hi = 0;
            for (int l = 0; l < 32; l++) {
                lo += ((q[l] & 0xF) + (((qh[l] >> (2 * j)) & 1) << 4)) * a[l];
                hi += ((q[l] >> 4) + (((qh[l] >> (2 * j + 1)) & 1) << 4)) * a[l + 32];
            }
            sumi += sc0 * lo + sc1 * hi;
            summ += m0 * (y[i].bsums[4 * j] + y[i].bsums[4 * j + 1]) + m1 * (y[i].bsums[4 * j + 2] + y[i].bsums[4 * j + 3]);
            q += 32; a += 64;
        }
        s += d * (float)sumi - dmin * (float)summ;
    }
    return s;
}

static float dot_q6_K_c(int n, const void *vx, const void *vy) {
    const blk_q6_K *x = vx; const blk_q8_K *y = vy;
    float s = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f(ld_h(&x[i].d));
        const uint8_t *ql = x[i].ql, *qh = x[i].qh; const int8_t *a = y[i].qs, *sc = x[i].scales;
        int sumi = 0;
        for (int j = 0; j < QKK / 128; j++) {
            int p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                p[0 + is] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * a[l];
                p[2 + is] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * a[l + 32];
                p[4 + is] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * a[l + 64];
                p[6 + is] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * a[l + 96];
            }
            for (int t = 0; t < 8; t++) sumi += sc[t] * p[t];
            ql += 64; qh += 32; a += 128; sc += 8;
        }
        s += d * (float)sumi;
    }
    return s;
}

/* ------------------------------------------------------------------ F32 weights (ggml_vec_dot_f32 / tinyBLAS) */
/* ggml_vec_dot_f32 (AVX2): acc[j][l] over element 32 i + 8 j + l (fma), reduced as
 * x_l = (acc0 + acc2) + (acc1 + acc3), then ((x0 + x4) + (x1 + x5)) + ((x2 + x6) + (x3 + x7)), the
 * elements past the last multiple of 32 added in float with fma (GCC contracts sumf += x * y). */
static float dot_f32_c(int n, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    float acc[4][8] = {{0}};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++) acc[j][l] = fmaf(x[i + 8 * j + l], y[i + 8 * j + l], acc[j][l]);
    float t[8];
    for (int l = 0; l < 8; l++) t[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    float r = ((t[0] + t[4]) + (t[1] + t[5])) + ((t[2] + t[6]) + (t[3] + t[7]));
    for (int i = np; i < n; i++) r += x[i] * y[i];
    return r;
}

/* llamafile tinyBLAS (k % 8 == 0): one accumulator, lane = index mod 8, hsum ((l0+l4)+(l2+l6))+((l1+l5)+(l3+l7)) */
static float dot_f32_tb_c(int n, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    float a[8] = {0};
    for (int i = 0; i < n; i += 8)
        for (int l = 0; l < 8; l++) a[l] = fmaf(x[i + l], y[i + l], a[l]);
    return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

static void quant_f32_c(const float *x, void *vy, int k) { memcpy(vy, x, (size_t)k * 4); }

/* ------------------------------------------------------------------ llama.cpp's other K-quant routes
 * ggml's CPU backend does not always run vec_dot for K-quant weights (see ROUTE_* below). The
 * integer block sums are the same; what differs is where they meet the float scales:
 *   repack gemv (ggml_gemv_q4_K_8x8_q8_K):  acc += (float)isum_block * (d * dy), per 256-block
 *   repack gemm (ggml_gemm_q4_K_8x8_q8_K):  the same per 64 values (two sub-blocks)
 *   tiled (ggml_compute_forward_mul_mat_tiled): acc += (d * (float)isum - dmin * (float)imin) * dy
 * each "+=" a single fma, and the min terms of the repack routes in their own accumulator,
 * subtracted at the end. */

/* ggml_quantize_mat_q8_K_4x8 (the activation rows of the repack gemm): quantize_row_q8_K except
 * for the sign of the scale: negative when any value equals +amax (the reference takes the sign of
 * the first value of largest magnitude). */
static void quant_q8_K_g4(const float *x, void *vy, int k) {
    blk_q8_K *y = vy;
    for (int i = 0; i < k / QKK; i++, x += QKK) {
        float amax = 0.f;
        for (int j = 0; j < QKK; j++) { const float a = fabsf(x[j]); amax = a > amax ? a : amax; }
        if (amax == 0.f) { memset(&y[i], 0, sizeof(y[i])); continue; }
        int pos = 0;
        for (int j = 0; j < QKK; j++) pos |= x[j] == amax;
        const float iscale = pos ? -127.f / amax : 127.f / amax;
        for (int j = 0; j < QKK; j++) { const int v = nearest_int(iscale * x[j]); y[i].qs[j] = (int8_t)(v < 127 ? v : 127); }
        for (int j = 0; j < QKK / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++) s += y[i].qs[16 * j + l];
            y[i].bsums[j] = (int16_t)s;
        }
        y[i].d = 1.f / iscale;
    }
}

/* integer sums of one Q4_K / Q5_K block against Q8_K: per sub-block (32 values) sc * dot and m * bsum */
static void k45_sums(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const blk_q8_K *y, int isc[8], int imn[8]) {
    const int8_t *a = y->qs;
    for (int j = 0; j < QKK / 64; j++, qs += 32, a += 64) {
        uint8_t sc0, m0, sc1, m1;
        scale_min_k4(2 * j, scales, &sc0, &m0);
        scale_min_k4(2 * j + 1, scales, &sc1, &m1);
        int lo = 0, hi = 0;
        for (int l = 0; l < 32; l++) {
            const int h0 = qh ? ((qh[l] >> (2 * j)) & 1) << 4 : 0, h1 = qh ? ((qh[l] >> (2 * j + 1)) & 1) << 4 : 0;
            lo += ((qs[l] & 0xF) + h0) * a[l];
            hi += ((qs[l] >> 4) + h1) * a[l + 32];
        }
        isc[2 * j] = sc0 * lo; isc[2 * j + 1] = sc1 * hi;
        imn[2 * j] = m0 * (y->bsums[4 * j] + y->bsums[4 * j + 1]);
        imn[2 * j + 1] = m1 * (y->bsums[4 * j + 2] + y->bsums[4 * j + 3]);
    }
}

static float dot_q4_K_rpv(int n, const void *vx, const void *vy) {
    const blk_q4_K *x = vx; const blk_q8_K *y = vy;
    float acc = 0.f, accm = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        int isc[8], imn[8], s = 0, m = 0;
        k45_sums(x[i].scales, x[i].qs, NULL, &y[i], isc, imn);
        for (int j = 0; j < 8; j++) { s += isc[j]; m += imn[j]; }
        acc = fmaf((float)s, h2f(ld_h(&x[i].d)) * y[i].d, acc);
        accm = fmaf((float)m, h2f(ld_h(&x[i].dmin)) * y[i].d, accm);
    }
    return acc - accm;
}

static float dot_q4_K_rpm(int n, const void *vx, const void *vy) {
    const blk_q4_K *x = vx; const blk_q8_K *y = vy;
    float acc = 0.f, accm = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        int isc[8], imn[8];
        k45_sums(x[i].scales, x[i].qs, NULL, &y[i], isc, imn);
        const float dd = h2f(ld_h(&x[i].d)) * y[i].d, dm = h2f(ld_h(&x[i].dmin)) * y[i].d;
        for (int j = 0; j < 4; j++) {
            acc = fmaf((float)(isc[2 * j] + isc[2 * j + 1]), dd, acc);
            accm = fmaf((float)(imn[2 * j] + imn[2 * j + 1]), dm, accm);
        }
    }
    return acc - accm;
}

static float dot_q4_K_tl(int n, const void *vx, const void *vy) {
    const blk_q4_K *x = vx; const blk_q8_K *y = vy;
    float acc = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        int isc[8], imn[8], s = 0, m = 0;
        k45_sums(x[i].scales, x[i].qs, NULL, &y[i], isc, imn);
        for (int j = 0; j < 8; j++) { s += isc[j]; m += imn[j]; }
        const float r = fmaf(-h2f(ld_h(&x[i].dmin)), (float)m, h2f(ld_h(&x[i].d)) * (float)s);
        acc = fmaf(r, y[i].d, acc);
    }
    return acc;
}

static float dot_q5_K_tl(int n, const void *vx, const void *vy) {
    const blk_q5_K *x = vx; const blk_q8_K *y = vy;
    float acc = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        int isc[8], imn[8], s = 0, m = 0;
        k45_sums(x[i].scales, x[i].qs, x[i].qh, &y[i], isc, imn);
        for (int j = 0; j < 8; j++) { s += isc[j]; m += imn[j]; }
        const float r = fmaf(-h2f(ld_h(&x[i].dmin)), (float)m, h2f(ld_h(&x[i].d)) * (float)s);
        acc = fmaf(r, y[i].d, acc);
    }
    return acc;
}

static int q6_K_isum(const blk_q6_K *x, const blk_q8_K *y) {
    const uint8_t *ql = x->ql, *qh = x->qh; const int8_t *a = y->qs, *sc = x->scales;
    int sumi = 0;
    for (int j = 0; j < QKK / 128; j++, ql += 64, qh += 32, a += 128, sc += 8) {
        int p[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int l = 0; l < 32; l++) {
            const int is = l / 16;
            p[0 + is] += (((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * a[l];
            p[2 + is] += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * a[l + 32];
            p[4 + is] += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * a[l + 64];
            p[6 + is] += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * a[l + 96];
        }
        for (int t = 0; t < 8; t++) sumi += sc[t] * p[t];
    }
    return sumi;
}

static float dot_q6_K_tl(int n, const void *vx, const void *vy) {
    const blk_q6_K *x = vx; const blk_q8_K *y = vy;
    float acc = 0.f;
    for (int i = 0; i < n / QKK; i++) acc = fmaf(h2f(ld_h(&x[i].d)) * (float)q6_K_isum(&x[i], &y[i]), y[i].d, acc);
    return acc;
}

/* ------------------------------------------------------------------ dequantization (portable, exact) */
/* Same float operations, in the same order, as gguf.quants (and ggml's dequantize_row_*); the file is
 * compiled with -ffp-contract=off so no multiply-add is fused. */
static void deq_f16(const void *vx, float *y, int k) { const half_t *x = vx; for (int i = 0; i < k; i++) y[i] = h2f(ld_h(x + i)); }
static void deq_bf16(const void *vx, float *y, int k) {
    const uint16_t *x = vx;
    for (int i = 0; i < k; i++) { uint16_t b; memcpy(&b, x + i, 2); y[i] = bf2f(b); }
}
static void deq_q4_0(const void *vx, float *y, int k) {
    const blk_q4_0 *x = vx;
    for (int i = 0; i < k / QK; i++, y += QK) {
        const float d = h2f(ld_h(&x[i].d));
        for (int j = 0; j < QK / 2; j++) { y[j] = d * (float)((x[i].qs[j] & 0xF) - 8); y[j + 16] = d * (float)((x[i].qs[j] >> 4) - 8); }
    }
}
static void deq_q4_1(const void *vx, float *y, int k) {
    const blk_q4_1 *x = vx;
    for (int i = 0; i < k / QK; i++, y += QK) {
        const float d = h2f(ld_h(&x[i].d)), m = h2f(ld_h(&x[i].m));
        for (int j = 0; j < QK / 2; j++) { y[j] = d * (float)(x[i].qs[j] & 0xF) + m; y[j + 16] = d * (float)(x[i].qs[j] >> 4) + m; }
    }
}
static void deq_q5_0(const void *vx, float *y, int k) {
    const blk_q5_0 *x = vx;
    for (int i = 0; i < k / QK; i++, y += QK) {
        const float d = h2f(ld_h(&x[i].d));
        const uint32_t qh = ld_u32(x[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = d * (float)(((x[i].qs[j] & 0xF) | h0) - 16);
            y[j + 16] = d * (float)(((x[i].qs[j] >> 4) | h1) - 16);
        }
    }
}
static void deq_q5_1(const void *vx, float *y, int k) {
    const blk_q5_1 *x = vx;
    for (int i = 0; i < k / QK; i++, y += QK) {
        const float d = h2f(ld_h(&x[i].d)), m = h2f(ld_h(&x[i].m));
        const uint32_t qh = ld_u32(x[i].qh);
        for (int j = 0; j < QK / 2; j++) {
            const int h0 = (int)((qh >> j) & 1u) << 4, h1 = (int)((qh >> (j + 16)) & 1u) << 4;
            y[j] = d * (float)((x[i].qs[j] & 0xF) | h0) + m;
            y[j + 16] = d * (float)((x[i].qs[j] >> 4) | h1) + m;
        }
    }
}
static void deq_q8_0(const void *vx, float *y, int k) {
    const blk_q8_0 *x = vx;
    for (int i = 0; i < k / QK; i++, y += QK) {
        const float d = h2f(ld_h(&x[i].d));
        for (int j = 0; j < QK; j++) y[j] = (float)x[i].qs[j] * d;
    }
}
static void deq_q4_K(const void *vx, float *y, int k) {
    const blk_q4_K *x = vx;
    for (int i = 0; i < k / QKK; i++) {
        const float d = h2f(ld_h(&x[i].d)), dmin = h2f(ld_h(&x[i].dmin));
        const uint8_t *q = x[i].qs;
        for (int j = 0; j < QKK / 64; j++, q += 32, y += 64) {
            uint8_t sc0, m0, sc1, m1;
            scale_min_k4(2 * j, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * j + 1, x[i].scales, &sc1, &m1);
            const float d0 = d * (float)sc0, n0 = dmin * (float)m0, d1 = d * (float)sc1, n1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) { y[l] = d0 * (float)(q[l] & 0xF) - n0; y[l + 32] = d1 * (float)(q[l] >> 4) - n1; }
        }
    }
}
static void deq_q5_K(const void *vx, float *y, int k) {
    const blk_q5_K *x = vx;
    for (int i = 0; i < k / QKK; i++) {
        const float d = h2f(ld_h(&x[i].d)), dmin = h2f(ld_h(&x[i].dmin));
        const uint8_t *q = x[i].qs, *qh = x[i].qh;
        for (int j = 0; j < QKK / 64; j++, q += 32, y += 64) {
            uint8_t sc0, m0, sc1, m1;
            scale_min_k4(2 * j, x[i].scales, &sc0, &m0);
            scale_min_k4(2 * j + 1, x[i].scales, &sc1, &m1);
            const float d0 = d * (float)sc0, n0 = dmin * (float)m0, d1 = d * (float)sc1, n1 = dmin * (float)m1;
            for (int l = 0; l < 32; l++) {
                y[l] = d0 * (float)((q[l] & 0xF) | (((qh[l] >> (2 * j)) & 1) << 4)) - n0;
                y[l + 32] = d1 * (float)((q[l] >> 4) | (((qh[l] >> (2 * j + 1)) & 1) << 4)) - n1;
            }
        }
    }
}
static void deq_q6_K(const void *vx, float *y, int k) {
    const blk_q6_K *x = vx;
    for (int i = 0; i < k / QKK; i++) {
        const float d = h2f(ld_h(&x[i].d));
        const uint8_t *ql = x[i].ql, *qh = x[i].qh; const int8_t *sc = x[i].scales;
        for (int j = 0; j < QKK / 128; j++, ql += 64, qh += 32, sc += 8, y += 128) {
            for (int l = 0; l < 32; l++) {
                const int is = l / 16;
                y[l] = (d * (float)sc[is]) * (float)(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
                y[l + 32] = (d * (float)sc[is + 2]) * (float)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
                y[l + 64] = (d * (float)sc[is + 4]) * (float)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
                y[l + 96] = (d * (float)sc[is + 6]) * (float)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
            }
        }
    }
}
static void deq_f32(const void *vx, float *y, int k) { memcpy(y, vx, (size_t)k * 4); }

/* ------------------------------------------------------------------ AVX2 kernels */
#ifdef PP_X86
AVX2_FN static inline float hsum_f8(__m256 x) {
    __m128 r = _mm_add_ps(_mm256_extractf128_ps(x, 1), _mm256_castps256_ps128(x));
    r = _mm_add_ps(r, _mm_movehl_ps(r, r));
    r = _mm_add_ss(r, _mm_movehdup_ps(r));
    return _mm_cvtss_f32(r);
}
AVX2_FN static inline int hsum_i8(__m256i a) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(a), _mm256_extracti128_si256(a, 1));
    s = _mm_add_epi32(s, _mm_unpackhi_epi64(s, s));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(s);
}
/* u8 x s8 products, pairs summed to i16, then pairs summed to i32, as float (8 lanes) */
AVX2_FN static inline __m256 dot_us8_f(__m256i ax, __m256i sy) {
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(_mm256_set1_epi16(1), _mm256_maddubs_epi16(ax, sy)));
}
AVX2_FN static inline __m256 dot_s8_f(__m256i x, __m256i y) {
    return dot_us8_f(_mm256_sign_epi8(x, x), _mm256_sign_epi8(y, x));
}
AVX2_FN static inline __m256i nibbles32(const uint8_t *p) {   /* byte j: p[j] & 15 (j<16), p[j-16] >> 4 */
    const __m128i t = _mm_loadu_si128((const __m128i *)p);
    const __m256i b = _mm256_insertf128_si256(_mm256_castsi128_si256(t), _mm_srli_epi16(t, 4), 1);
    return _mm256_and_si256(b, _mm256_set1_epi8(0xF));
}
AVX2_FN static inline __m256i bits32(const uint8_t *p) {      /* byte j: 0xFF if bit j of p[0..3] is set */
    const __m256i v = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ld_u32(p)),
        _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0));
    const __m256i m = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    return _mm256_cmpeq_epi8(_mm256_and_si256(v, m), m);
}
AVX2_FN static inline float h2f_x(half_t h) { return _cvtsh_ss(h); }

AVX2_FN static void quant_q8_0_avx2(const float *x, void *vy, int k) {
    blk_q8_0 *y = vy;
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < k / QK; i++, x += QK) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) { v[j] = _mm256_loadu_ps(x + 8 * j); amax = _mm256_max_ps(amax, _mm256_andnot_ps(sgn, v[j])); }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        y[i].d = _cvtss_sh(mx / 127.f, 0);
        const __m256 id = _mm256_set1_ps(mx != 0.f ? 127.f / mx : 0.f);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

AVX2_FN static void quant_q8_1_avx2(const float *x, void *vy, int k) {
    blk_q8_1 *y = vy;
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    for (int i = 0; i < k / QK; i++, x += QK) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        for (int j = 0; j < 4; j++) { v[j] = _mm256_loadu_ps(x + 8 * j); amax = _mm256_max_ps(amax, _mm256_andnot_ps(sgn, v[j])); }
        __m128 m4 = _mm_max_ps(_mm256_extractf128_ps(amax, 1), _mm256_castps256_ps128(amax));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const float mx = _mm_cvtss_f32(m4);
        const float d = mx / 127.f;
        y[i].d = _cvtss_sh(d, 0);
        const __m256 id = _mm256_set1_ps(mx != 0.f ? 127.f / mx : 0.f);
        __m256i q[4];
        for (int j = 0; j < 4; j++) q[j] = _mm256_cvtps_epi32(_mm256_round_ps(_mm256_mul_ps(v[j], id), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        const int sum = hsum_i8(_mm256_add_epi32(_mm256_add_epi32(q[0], q[1]), _mm256_add_epi32(q[2], q[3])));
        y[i].s = _cvtss_sh(d * (float)sum, 0);
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q[0], q[1]), _mm256_packs_epi32(q[2], q[3]));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)y[i].qs, p);
    }
}

AVX2_FN static void quant_f16_avx2(const float *x, void *vy, int k) {
    half_t *y = vy;
    int i = 0;
    for (; i + 8 <= k; i += 8) _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    for (; i < k; i++) y[i] = _cvtss_sh(x[i], 0);
}

AVX2_FN static float dot_f16_avx2(int n, const void *vx, const void *vy) {
    const half_t *x = vx, *y = vy;
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            s[j] = _mm256_fmadd_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(x + i + 8 * j))),
                                   _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(y + i + 8 * j))), s[j]);
    s[0] = _mm256_add_ps(s[0], s[2]); s[1] = _mm256_add_ps(s[1], s[3]); s[0] = _mm256_add_ps(s[0], s[1]);
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s[0]), _mm256_extractf128_ps(s[0], 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double r = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; i++) r += (double)(h2f_x(ld_h(x + i)) * h2f_x(ld_h(y + i)));
    return (float)r;
}

AVX2_FN static inline __m256 bf16x8(const uint16_t *p) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
}
AVX2_FN static float dot_bf16_avx2(int n, const void *vx, const void *vy) {
    const uint16_t *x = vx, *y = vy;
    __m256 s[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps()};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++) s[j] = _mm256_fmadd_ps(bf16x8(x + i + 8 * j), bf16x8(y + i + 8 * j), s[j]);
    double r = (double)hsum_f8(_mm256_add_ps(_mm256_add_ps(s[0], s[1]), _mm256_add_ps(s[2], s[3])));
    for (int i = np; i < n; i++) { uint16_t a, b; memcpy(&a, x + i, 2); memcpy(&b, y + i, 2); r += (double)(bf2f(a) * bf2f(b)); }
    return (float)r;
}

AVX2_FN static float dot_q4_0_avx2(int n, const void *vx, const void *vy) {
    const blk_q4_0 *x = vx; const blk_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const __m256 d = _mm256_set1_ps(h2f_x(ld_h(&x[i].d)) * h2f_x(ld_h(&y[i].d)));
        const __m256i qx = _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8));
        acc = _mm256_fmadd_ps(d, dot_s8_f(qx, _mm256_loadu_si256((const __m256i *)y[i].qs)), acc);
    }
    return hsum_f8(acc);
}

AVX2_FN static float dot_q4_1_avx2(int n, const void *vx, const void *vy) {
    const blk_q4_1 *x = vx; const blk_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int i = 0; i < n / QK; i++) {
        summs += h2f_x(ld_h(&x[i].m)) * h2f_x(ld_h(&y[i].s));
        const __m256 d = _mm256_mul_ps(_mm256_set1_ps(h2f_x(ld_h(&x[i].d))), _mm256_set1_ps(h2f_x(ld_h(&y[i].d))));
        acc = _mm256_fmadd_ps(d, dot_us8_f(nibbles32(x[i].qs), _mm256_loadu_si256((const __m256i *)y[i].qs)), acc);
    }
    return hsum_f8(acc) + summs;
}

AVX2_FN static float dot_q5_0_avx2(int n, const void *vx, const void *vy) {
    const blk_q5_0 *x = vx; const blk_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const __m256 d = _mm256_set1_ps(h2f_x(ld_h(&x[i].d)) * h2f_x(ld_h(&y[i].d)));
        const __m256i hi = _mm256_andnot_si256(bits32(x[i].qh), _mm256_set1_epi8((char)0xF0));
        const __m256i qx = _mm256_or_si256(nibbles32(x[i].qs), hi);
        acc = _mm256_fmadd_ps(d, dot_s8_f(qx, _mm256_loadu_si256((const __m256i *)y[i].qs)), acc);
    }
    return hsum_f8(acc);
}

AVX2_FN static float dot_q5_1_avx2(int n, const void *vx, const void *vy) {
    const blk_q5_1 *x = vx; const blk_q8_1 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int i = 0; i < n / QK; i++) {
        summs += h2f_x(ld_h(&x[i].m)) * h2f_x(ld_h(&y[i].s));
        const __m256i hi = _mm256_and_si256(bits32(x[i].qh), _mm256_set1_epi8(0x10));
        const __m256i qx = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256 q = dot_us8_f(qx, _mm256_loadu_si256((const __m256i *)y[i].qs));
        acc = _mm256_fmadd_ps(q, _mm256_mul_ps(_mm256_set1_ps(h2f_x(ld_h(&x[i].d))), _mm256_set1_ps(h2f_x(ld_h(&y[i].d)))), acc);
    }
    return hsum_f8(acc) + summs;
}

AVX2_FN static float dot_q8_0_avx2(int n, const void *vx, const void *vy) {
    const blk_q8_0 *x = vx; const blk_q8_0 *y = vy;
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const __m256 d = _mm256_set1_ps(h2f_x(ld_h(&x[i].d)) * h2f_x(ld_h(&y[i].d)));
        acc = _mm256_fmadd_ps(d, dot_s8_f(_mm256_loadu_si256((const __m256i *)x[i].qs),
                                          _mm256_loadu_si256((const __m256i *)y[i].qs)), acc);
    }
    return hsum_f8(acc);
}

/* the 8 sub-block scales (out[0..7]) and 8 mins (out[8..15]) of a Q4_K/Q5_K super-block, unpacked
 * from the 12 packed bytes four at a time (the same values as scale_min_k4) */
AVX2_FN static inline void k4_scales(const uint8_t *q, int16_t out[16]) {
    const uint32_t u0 = ld_u32(q), u1 = ld_u32(q + 4), u2 = ld_u32(q + 8);
    const uint32_t s_lo = u0 & 0x3f3f3f3fu, m_lo = u1 & 0x3f3f3f3fu;
    const uint32_t s_hi = (u2 & 0x0f0f0f0fu) | (((u0 >> 6) & 0x03030303u) << 4);
    const uint32_t m_hi = ((u2 >> 4) & 0x0f0f0f0fu) | (((u1 >> 6) & 0x03030303u) << 4);
    _mm256_storeu_si256((__m256i *)out, _mm256_cvtepu8_epi16(_mm_set_epi32((int)m_hi, (int)m_lo, (int)s_hi, (int)s_lo)));
}

AVX2_FN static inline __m128i k_minprod(const int16_t mn[8], const int16_t *bsums) {
    const __m256i bs = _mm256_loadu_si256((const __m256i *)bsums);
    const __m128i s = _mm_hadd_epi16(_mm256_castsi256_si128(bs), _mm256_extracti128_si256(bs, 1));
    return _mm_madd_epi16(_mm_loadu_si128((const __m128i *)mn), s);
}

AVX2_FN static float dot_q4_K_avx2(int n, const void *vx, const void *vy) {
    const blk_q4_K *x = vx; const blk_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc = _mm256_setzero_ps();
    __m128 acc_m = _mm_setzero_ps();
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f_x(ld_h(&x[i].d)), dmin = -y[i].d * h2f_x(ld_h(&x[i].dmin));
        int16_t sm[16];
        k4_scales(x[i].scales, sm);
        const int16_t *sc = sm, *mn = sm + 8;
        acc_m = _mm_fmadd_ps(_mm_set1_ps(dmin), _mm_cvtepi32_ps(k_minprod(mn, y[i].bsums)), acc_m);
        const uint8_t *q4 = x[i].qs; const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < QKK / 64; j++, q4 += 32, q8 += 64) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)q4);
            const __m256i lo = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j]),
                _mm256_maddubs_epi16(_mm256_and_si256(b, m4), _mm256_loadu_si256((const __m256i *)q8)));
            const __m256i hi = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j + 1]),
                _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), _mm256_loadu_si256((const __m256i *)(q8 + 32))));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(lo, hi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    acc_m = _mm_add_ps(acc_m, _mm_movehl_ps(acc_m, acc_m));
    acc_m = _mm_add_ss(acc_m, _mm_movehdup_ps(acc_m));
    return hsum_f8(acc) + _mm_cvtss_f32(acc_m);
}

AVX2_FN static float dot_q5_K_avx2(int n, const void *vx, const void *vy) {
    const blk_q5_K *x = vx; const blk_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    __m256 acc = _mm256_setzero_ps();
    float summs = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f_x(ld_h(&x[i].d)), dmin = -y[i].d * h2f_x(ld_h(&x[i].dmin));
        int16_t sm[16];
        k4_scales(x[i].scales, sm);
        const int16_t *sc = sm, *mn = sm + 8;
        const __m128i prod = k_minprod(mn, y[i].bsums);
        const __m128i z = _mm_setzero_si128();
        summs += dmin * (float)_mm_cvtsi128_si32(_mm_hadd_epi32(_mm_hadd_epi32(prod, z), z));
        const __m256i hb = _mm256_loadu_si256((const __m256i *)x[i].qh);
        const uint8_t *q5 = x[i].qs; const int8_t *q8 = y[i].qs;
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < QKK / 64; j++, q5 += 32, q8 += 64) {
            const __m256i b = _mm256_loadu_si256((const __m256i *)q5);
            const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one);
            const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one);
            const __m256i v0 = _mm256_or_si256(_mm256_and_si256(b, m4), _mm256_slli_epi16(h0, 4));
            const __m256i v1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b, 4), m4), _mm256_slli_epi16(h1, 4));
            const __m256i p0 = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j]), _mm256_maddubs_epi16(v0, _mm256_loadu_si256((const __m256i *)q8)));
            const __m256i p1 = _mm256_madd_epi16(_mm256_set1_epi16(sc[2 * j + 1]), _mm256_maddubs_epi16(v1, _mm256_loadu_si256((const __m256i *)(q8 + 32))));
            sumi = _mm256_add_epi32(sumi, _mm256_add_epi32(p0, p1));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(sumi), acc);
    }
    return hsum_f8(acc) + summs;
}

AVX2_FN static float dot_q6_K_avx2(int n, const void *vx, const void *vy) {
    /* q6 is used unsigned (0..63) and the -32 offset comes off once per super-block as
     * 32 * sum_j scale[j] * bsums[j] (lane i: sub-blocks 2i and 2i+1), as the x86 ggml build does */
    const blk_q6_K *x = vx; const blk_q8_K *y = vy;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    __m256 acc = _mm256_setzero_ps();
    for (int i = 0; i < n / QKK; i++) {
        const float d = y[i].d * h2f_x(ld_h(&x[i].d));
        const uint8_t *ql = x[i].ql, *qh = x[i].qh; const int8_t *q8 = y[i].qs, *sc = x[i].scales;
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)sc));
        const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[i].bsums), sc16), 5);
        __m256i sumi = _mm256_setzero_si256();
        for (int j = 0; j < QKK / 128; j++, ql += 64, qh += 32, q8 += 128, sc += 8) {
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m3), 4));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m3), 4));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m3), 4));
            for (int t = 0; t < 4; t++) {
                const __m256i p = _mm256_maddubs_epi16(v[t], _mm256_loadu_si256((const __m256i *)(q8 + 32 * t)));
                const __m256i s16 = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_set1_epi16(sc[2 * t])), _mm_set1_epi16(sc[2 * t + 1]), 1);
                sumi = _mm256_add_epi32(sumi, _mm256_madd_epi16(s16, p));
            }
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(d), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi, off)), acc);
    }
    return hsum_f8(acc);
}

/* Several activation rows (columns of the output) against one weight row: the weight blocks are
 * unpacked once and every column keeps exactly the single-column arithmetic (same accumulator lanes,
 * same order), so a prefill gives the same numbers as that many decode steps. ny <= NYMAX. */
AVX2_FN static void dotn_q8_0_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q8_0 *x = vx;
    __m256 acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const float dx = h2f_x(ld_h(&x[i].d));
        const __m256i qx = _mm256_loadu_si256((const __m256i *)x[i].qs);
        const __m256i ax = _mm256_sign_epi8(qx, qx);
        for (int c = 0; c < ny; c++) {
            const blk_q8_0 *y = (const blk_q8_0 *)vy[c] + i;
            const __m256 d = _mm256_set1_ps(dx * h2f_x(ld_h(&y->d)));
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
            acc[c] = _mm256_fmadd_ps(d, dot_us8_f(ax, _mm256_sign_epi8(qy, qx)), acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = hsum_f8(acc[c]);
}

AVX2_FN static void dotn_q4_0_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q4_0 *x = vx;
    __m256 acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const float dx = h2f_x(ld_h(&x[i].d));
        const __m256i qx = _mm256_sub_epi8(nibbles32(x[i].qs), _mm256_set1_epi8(8));
        const __m256i ax = _mm256_sign_epi8(qx, qx);
        for (int c = 0; c < ny; c++) {
            const blk_q8_0 *y = (const blk_q8_0 *)vy[c] + i;
            const __m256 d = _mm256_set1_ps(dx * h2f_x(ld_h(&y->d)));
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
            acc[c] = _mm256_fmadd_ps(d, dot_us8_f(ax, _mm256_sign_epi8(qy, qx)), acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = hsum_f8(acc[c]);
}

AVX2_FN static void dotn_q5_0_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q5_0 *x = vx;
    __m256 acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / QK; i++) {
        const float dx = h2f_x(ld_h(&x[i].d));
        const __m256i hi = _mm256_andnot_si256(bits32(x[i].qh), _mm256_set1_epi8((char)0xF0));
        const __m256i qx = _mm256_or_si256(nibbles32(x[i].qs), hi);
        const __m256i ax = _mm256_sign_epi8(qx, qx);
        for (int c = 0; c < ny; c++) {
            const blk_q8_0 *y = (const blk_q8_0 *)vy[c] + i;
            const __m256 d = _mm256_set1_ps(dx * h2f_x(ld_h(&y->d)));
            const __m256i qy = _mm256_loadu_si256((const __m256i *)y->qs);
            acc[c] = _mm256_fmadd_ps(d, dot_us8_f(ax, _mm256_sign_epi8(qy, qx)), acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = hsum_f8(acc[c]);
}

/* Several weight rows (NR, rows xrow bytes apart) against one activation row (decode): each row keeps
 * exactly the single-row arithmetic of dot_<type>_avx2 (its own accumulator, blocks in order, the same
 * scale product), the rows' independent accumulator chains just interleave (llamafile's tinyBLAS tiles
 * rows the same way for a one-column product). */
#define NR 4
#define DOTR_Q0(NAME, BLK, UNPACK)                                                                      \
AVX2_FN static void NAME(int n, const uint8_t *vx, size_t xrow, const void *vy, float *s) {             \
    const blk_q8_0 *y = vy;                                                                             \
    __m256 acc[NR];                                                                                     \
    for (int r = 0; r < NR; r++) acc[r] = _mm256_setzero_ps();                                          \
    for (int i = 0; i < n / QK; i++) {                                                                  \
        const float dy = h2f_x(ld_h(&y[i].d));                                                          \
        const __m256i qy = _mm256_loadu_si256((const __m256i *)y[i].qs);                                \
        for (int r = 0; r < NR; r++) {                                                                  \
            const BLK *x = (const BLK *)(vx + (size_t)r * xrow) + i;                                    \
            const __m256 d = _mm256_set1_ps(h2f_x(ld_h(&x->d)) * dy);                                   \
            const __m256i qx = UNPACK;                                                                  \
            acc[r] = _mm256_fmadd_ps(d, dot_s8_f(qx, qy), acc[r]);                                      \
        }                                                                                               \
    }                                                                                                   \
    for (int r = 0; r < NR; r++) s[r] = hsum_f8(acc[r]);                                                \
}
DOTR_Q0(dotr_q4_0_avx2, blk_q4_0, _mm256_sub_epi8(nibbles32(x->qs), _mm256_set1_epi8(8)))
DOTR_Q0(dotr_q5_0_avx2, blk_q5_0,
        _mm256_or_si256(nibbles32(x->qs), _mm256_andnot_si256(bits32(x->qh), _mm256_set1_epi8((char)0xF0))))

AVX2_FN static void dotn_q4_K_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q4_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0xF);
    __m256 acc[NYMAX];
    __m128 acc_m[NYMAX];
    for (int c = 0; c < ny; c++) { acc[c] = _mm256_setzero_ps(); acc_m[c] = _mm_setzero_ps(); }
    for (int i = 0; i < n / QKK; i++) {
        const float xd = h2f_x(ld_h(&x[i].d)), xm = h2f_x(ld_h(&x[i].dmin));
        int16_t sm[16];
        k4_scales(x[i].scales, sm);
        const blk_q8_K *y[NYMAX];
        __m256i sumi[NYMAX];
        for (int c = 0; c < ny; c++) {
            y[c] = (const blk_q8_K *)vy[c] + i;
            acc_m[c] = _mm_fmadd_ps(_mm_set1_ps(-y[c]->d * xm), _mm_cvtepi32_ps(k_minprod(sm + 8, y[c]->bsums)), acc_m[c]);
            sumi[c] = _mm256_setzero_si256();
        }
        for (int j = 0; j < 4; j++) {   /* integer sums: the order over j and c does not change them */
            const __m256i b = _mm256_loadu_si256((const __m256i *)(x[i].qs + 32 * j));
            const __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
            const __m256i sl = _mm256_set1_epi16(sm[2 * j]), sh = _mm256_set1_epi16(sm[2 * j + 1]);
            for (int c = 0; c < ny; c++) {
                const __m256i p0 = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[c]->qs + 64 * j))));
                const __m256i p1 = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y[c]->qs + 64 * j + 32))));
                sumi[c] = _mm256_add_epi32(sumi[c], _mm256_add_epi32(p0, p1));
            }
        }
        for (int c = 0; c < ny; c++)
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c]->d * xd), _mm256_cvtepi32_ps(sumi[c]), acc[c]);
    }
    for (int c = 0; c < ny; c++) {
        __m128 m = _mm_add_ps(acc_m[c], _mm_movehl_ps(acc_m[c], acc_m[c]));
        m = _mm_add_ss(m, _mm_movehdup_ps(m));
        s[c] = hsum_f8(acc[c]) + _mm_cvtss_f32(m);
    }
}

AVX2_FN static void dotn_q6_K_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q6_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    __m256 acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = _mm256_setzero_ps();
    for (int i = 0; i < n / QKK; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const blk_q8_K *y[NYMAX];
        __m256i sumi[NYMAX];
        for (int c = 0; c < ny; c++) { y[c] = (const blk_q8_K *)vy[c] + i; sumi[c] = _mm256_setzero_si256(); }
        for (int j = 0; j < 2; j++) {
            const uint8_t *ql = x[i].ql + 64 * j, *qh = x[i].qh + 32 * j;
            const int8_t *sc = x[i].scales + 8 * j;
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m3), 4));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m3), 4));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m3), 4));
            for (int t = 0; t < 4; t++) {
                const __m256i s16 = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_set1_epi16(sc[2 * t])), _mm_set1_epi16(sc[2 * t + 1]), 1);
                for (int c = 0; c < ny; c++) {
                    const __m256i p = _mm256_maddubs_epi16(v[t], _mm256_loadu_si256((const __m256i *)(y[c]->qs + 128 * j + 32 * t)));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s16, p));
                }
            }
        }
        const float xd = h2f_x(ld_h(&x[i].d));
        for (int c = 0; c < ny; c++) {
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[c]->bsums), sc16), 5);
            acc[c] = _mm256_fmadd_ps(_mm256_set1_ps(y[c]->d * xd), _mm256_cvtepi32_ps(_mm256_sub_epi32(sumi[c], off)), acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = hsum_f8(acc[c]);
}

/* The other K-quant routes (see "llama.cpp's other K-quant routes" above) for up to NYMAX activation
 * rows: the integer sums in SIMD (exact in any order), the float steps per row exactly as the
 * portable functions do them. */
AVX2_FN static inline __m128i hsum4_i32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {  /* (sum v0, .., sum v3) */
    const __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(v0, v1), _mm256_hadd_epi32(v2, v3));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* per 64-value group j of one Q4_K/Q5_K block and row c: isum[c][j] = sc * dot of both sub-blocks,
 * imin[c][j] = their mins times the activation sums */
AVX2_FN static inline void k45_group_sums(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh,
                                          const blk_q8_K *const *y, int ny, __m128i *isum, __m128i *imin) {
    const __m256i m4 = _mm256_set1_epi8(0xF), one = _mm256_set1_epi8(1);
    int16_t sm[16];
    k4_scales(scales, sm);
    __m256i v[NYMAX][4];
    const __m256i hb = qh ? _mm256_loadu_si256((const __m256i *)qh) : _mm256_setzero_si256();
    for (int j = 0; j < 4; j++) {
        const __m256i b = _mm256_loadu_si256((const __m256i *)(qs + 32 * j));
        __m256i lo = _mm256_and_si256(b, m4), hi = _mm256_and_si256(_mm256_srli_epi16(b, 4), m4);
        if (qh) {
            lo = _mm256_or_si256(lo, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j), one), 4));
            hi = _mm256_or_si256(hi, _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2 * j + 1), one), 4));
        }
        const __m256i sl = _mm256_set1_epi16(sm[2 * j]), sh = _mm256_set1_epi16(sm[2 * j + 1]);
        for (int c = 0; c < ny; c++) {
            const __m256i p0 = _mm256_madd_epi16(sl, _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y[c]->qs + 64 * j))));
            const __m256i p1 = _mm256_madd_epi16(sh, _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y[c]->qs + 64 * j + 32))));
            v[c][j] = _mm256_add_epi32(p0, p1);
        }
    }
    for (int c = 0; c < ny; c++) {
        isum[c] = hsum4_i32(v[c][0], v[c][1], v[c][2], v[c][3]);
        imin[c] = k_minprod(sm + 8, y[c]->bsums);
    }
}

static inline int sum4_i32(__m128i v) {
    int a[4];
    memcpy(a, &v, 16);
    return a[0] + a[1] + a[2] + a[3];
}

#define DOTN_PROLOGUE(BT) \
    const BT *x = vx; \
    float acc[NYMAX], accm[NYMAX]; \
    for (int c = 0; c < ny; c++) { acc[c] = 0.f; accm[c] = 0.f; }

/* gemv route: one fma per 256-block (gemm = 0) or per 64-value group (gemm = 1) */
AVX2_FN static inline void dotn_q4_K_rp(int n, const void *vx, const void *const *vy, int ny, float *s, int gemm) {
    DOTN_PROLOGUE(blk_q4_K)
    for (int i = 0; i < n / QKK; i++) {
        const blk_q8_K *y[NYMAX];
        for (int c = 0; c < ny; c++) y[c] = (const blk_q8_K *)vy[c] + i;
        __m128i isum[NYMAX], imin[NYMAX];
        k45_group_sums(x[i].scales, x[i].qs, NULL, y, ny, isum, imin);
        const float xd = h2f_x(ld_h(&x[i].d)), xm = h2f_x(ld_h(&x[i].dmin));
        for (int c = 0; c < ny; c++) {
            const float dd = xd * y[c]->d, dm = xm * y[c]->d;
            if (gemm) {
                int a[4], b[4];
                memcpy(a, &isum[c], 16); memcpy(b, &imin[c], 16);
                for (int j = 0; j < 4; j++) { acc[c] = fmaf((float)a[j], dd, acc[c]); accm[c] = fmaf((float)b[j], dm, accm[c]); }
            } else {
                acc[c] = fmaf((float)sum4_i32(isum[c]), dd, acc[c]);
                accm[c] = fmaf((float)sum4_i32(imin[c]), dm, accm[c]);
            }
        }
    }
    for (int c = 0; c < ny; c++) s[c] = acc[c] - accm[c];
}
AVX2_FN static void dotn_q4_K_rpv_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) { dotn_q4_K_rp(n, vx, vy, ny, s, 0); }
AVX2_FN static void dotn_q4_K_rpm_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) { dotn_q4_K_rp(n, vx, vy, ny, s, 1); }
AVX2_FN static float dot_q4_K_rpv_avx2(int n, const void *vx, const void *vy) { float r; const void *y[1] = {vy}; dotn_q4_K_rp(n, vx, y, 1, &r, 0); return r; }
AVX2_FN static float dot_q4_K_rpm_avx2(int n, const void *vx, const void *vy) { float r; const void *y[1] = {vy}; dotn_q4_K_rp(n, vx, y, 1, &r, 1); return r; }

/* tiled route, Q4_K (qh5 = 0) / Q5_K (qh5 = 1) */
AVX2_FN static inline void dotn_k45_tl(int n, const void *vx, const void *const *vy, int ny, float *s, int q5) {
    float acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = 0.f;
    const size_t bsz = q5 ? sizeof(blk_q5_K) : sizeof(blk_q4_K);
    for (int i = 0; i < n / QKK; i++) {
        const uint8_t *blk = (const uint8_t *)vx + (size_t)i * bsz;
        const blk_q4_K *b4 = (const blk_q4_K *)blk; const blk_q5_K *b5 = (const blk_q5_K *)blk;
        const blk_q8_K *y[NYMAX];
        for (int c = 0; c < ny; c++) y[c] = (const blk_q8_K *)vy[c] + i;
        __m128i isum[NYMAX], imin[NYMAX];
        if (q5) k45_group_sums(b5->scales, b5->qs, b5->qh, y, ny, isum, imin);
        else k45_group_sums(b4->scales, b4->qs, NULL, y, ny, isum, imin);
        const float xd = h2f_x(ld_h(q5 ? &b5->d : &b4->d)), xm = h2f_x(ld_h(q5 ? &b5->dmin : &b4->dmin));
        for (int c = 0; c < ny; c++) {
            const float r = fmaf(-xm, (float)sum4_i32(imin[c]), xd * (float)sum4_i32(isum[c]));
            acc[c] = fmaf(r, y[c]->d, acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = acc[c];
}
AVX2_FN static void dotn_q4_K_tl_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) { dotn_k45_tl(n, vx, vy, ny, s, 0); }
AVX2_FN static void dotn_q5_K_tl_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) { dotn_k45_tl(n, vx, vy, ny, s, 1); }
AVX2_FN static float dot_q4_K_tl_avx2(int n, const void *vx, const void *vy) { float r; const void *y[1] = {vy}; dotn_k45_tl(n, vx, y, 1, &r, 0); return r; }
AVX2_FN static float dot_q5_K_tl_avx2(int n, const void *vx, const void *vy) { float r; const void *y[1] = {vy}; dotn_k45_tl(n, vx, y, 1, &r, 1); return r; }

AVX2_FN static void dotn_q6_K_tl_avx2(int n, const void *vx, const void *const *vy, int ny, float *s) {
    const blk_q6_K *x = vx;
    const __m256i m4 = _mm256_set1_epi8(0xF), m3 = _mm256_set1_epi8(3);
    float acc[NYMAX];
    for (int c = 0; c < ny; c++) acc[c] = 0.f;
    for (int i = 0; i < n / QKK; i++) {
        const __m256i sc16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x[i].scales));
        const blk_q8_K *y[NYMAX];
        __m256i sumi[NYMAX];
        for (int c = 0; c < ny; c++) { y[c] = (const blk_q8_K *)vy[c] + i; sumi[c] = _mm256_setzero_si256(); }
        for (int j = 0; j < 2; j++) {
            const uint8_t *ql = x[i].ql + 64 * j, *qh = x[i].qh + 32 * j;
            const int8_t *sc = x[i].scales + 8 * j;
            const __m256i b1 = _mm256_loadu_si256((const __m256i *)ql);
            const __m256i b2 = _mm256_loadu_si256((const __m256i *)(ql + 32));
            const __m256i bh = _mm256_loadu_si256((const __m256i *)qh);
            __m256i v[4];
            v[0] = _mm256_or_si256(_mm256_and_si256(b1, m4), _mm256_slli_epi16(_mm256_and_si256(bh, m3), 4));
            v[1] = _mm256_or_si256(_mm256_and_si256(b2, m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 2), m3), 4));
            v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b1, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 4), m3), 4));
            v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(b2, 4), m4), _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(bh, 6), m3), 4));
            for (int t = 0; t < 4; t++) {
                const __m256i s16 = _mm256_insertf128_si256(_mm256_castsi128_si256(_mm_set1_epi16(sc[2 * t])), _mm_set1_epi16(sc[2 * t + 1]), 1);
                for (int c = 0; c < ny; c++) {
                    const __m256i p = _mm256_maddubs_epi16(v[t], _mm256_loadu_si256((const __m256i *)(y[c]->qs + 128 * j + 32 * t)));
                    sumi[c] = _mm256_add_epi32(sumi[c], _mm256_madd_epi16(s16, p));
                }
            }
        }
        const float xd = h2f_x(ld_h(&x[i].d));
        for (int c = 0; c < ny; c++) {
            const __m256i off = _mm256_slli_epi32(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y[c]->bsums), sc16), 5);
            acc[c] = fmaf(xd * (float)hsum_i8(_mm256_sub_epi32(sumi[c], off)), y[c]->d, acc[c]);
        }
    }
    for (int c = 0; c < ny; c++) s[c] = acc[c];
}
AVX2_FN static float dot_q6_K_tl_avx2(int n, const void *vx, const void *vy) { float r; const void *y[1] = {vy}; dotn_q6_K_tl_avx2(n, vx, y, 1, &r); return r; }

AVX2_FN static float dot_f32_avx2(int n, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32) {
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 16), _mm256_loadu_ps(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 24), _mm256_loadu_ps(y + i + 24), a3);
    }
    const __m256 t = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    float r = _mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; i++) r += x[i] * y[i];
    return r;
}

AVX2_FN static float dot_f32_tb_avx2(int n, const void *vx, const void *vy) {
    const float *x = vx, *y = vy;
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) a = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), a);
    return hsum_f8(a);
}
#endif /* PP_X86 */

/* ------------------------------------------------------------------ type traits */
typedef float (*dot_fn)(int, const void *, const void *);
typedef void (*quant_fn)(const float *, void *, int);
typedef void (*deq_fn)(const void *, float *, int);
typedef void (*dotn_fn)(int, const void *, const void *const *, int, float *);
typedef void (*dotr_fn)(int, const uint8_t *, size_t, const void *, float *);

typedef struct {
    int blck;        /* weights per block */
    int bytes;       /* bytes per block */
    int vec_type;    /* type the activation is quantized to */
    dot_fn dot_c, dot_simd;
    quant_fn quant_c, quant_simd;  /* from_float of this type (as a vec_dot_type) */
    deq_fn deq;
    dotn_fn dotn_simd;  /* several activation rows at once (AVX2; NULL: one dot per row) */
    dotr_fn dotr_simd;  /* NR weight rows against one activation row (AVX2; NULL: one dot per row) */
} traits_t;

static traits_t TR[T_COUNT];
int g_simd = 0;      /* use the AVX2 kernels */
int g_has_avx2 = 0;  /* the CPU has AVX2, FMA and F16C */

static void init_traits(void) {
    memset(TR, 0, sizeof(TR));
    TR[T_F32] = (traits_t){1, 4, T_F32, dot_f32_c, NULL, quant_f32_c, NULL, deq_f32, NULL};
    TR[T_F16] = (traits_t){1, 2, T_F16, dot_f16_c, NULL, quant_f16_c, NULL, deq_f16, NULL};
    TR[T_BF16] = (traits_t){1, 2, T_BF16, dot_bf16_c, NULL, quant_bf16_c, NULL, deq_bf16, NULL};
    TR[T_Q4_0] = (traits_t){QK, 18, T_Q8_0, dot_q4_0_c, NULL, NULL, NULL, deq_q4_0, NULL};
    TR[T_Q4_1] = (traits_t){QK, 20, T_Q8_1, dot_q4_1_c, NULL, NULL, NULL, deq_q4_1, NULL};
    TR[T_Q5_0] = (traits_t){QK, 22, T_Q8_0, dot_q5_0_c, NULL, NULL, NULL, deq_q5_0, NULL};
    TR[T_Q5_1] = (traits_t){QK, 24, T_Q8_1, dot_q5_1_c, NULL, NULL, NULL, deq_q5_1, NULL};
    TR[T_Q8_0] = (traits_t){QK, 34, T_Q8_0, dot_q8_0_c, NULL, quant_q8_0_c, NULL, deq_q8_0, NULL};
    TR[T_Q8_1] = (traits_t){QK, 36, T_Q8_1, NULL, NULL, quant_q8_1_c, NULL, NULL, NULL};
    TR[T_Q4_K] = (traits_t){QKK, 144, T_Q8_K, dot_q4_K_c, NULL, NULL, NULL, deq_q4_K, NULL};
    TR[T_Q5_K] = (traits_t){QKK, 176, T_Q8_K, dot_q5_K_c, NULL, NULL, NULL, deq_q5_K, NULL};
    TR[T_Q6_K] = (traits_t){QKK, 210, T_Q8_K, dot_q6_K_c, NULL, NULL, NULL, deq_q6_K, NULL};
    TR[T_Q8_K] = (traits_t){QKK, 292, T_Q8_K, NULL, NULL, quant_q8_K_c, NULL, NULL, NULL};
#ifdef PP_X86
    __builtin_cpu_init();
    g_has_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
    TR[T_F32].dot_simd = dot_f32_avx2;
    TR[T_F16].dot_simd = dot_f16_avx2;   TR[T_F16].quant_simd = quant_f16_avx2;
    TR[T_BF16].dot_simd = dot_bf16_avx2;
    TR[T_Q4_0].dot_simd = dot_q4_0_avx2; TR[T_Q4_1].dot_simd = dot_q4_1_avx2;
    TR[T_Q5_0].dot_simd = dot_q5_0_avx2; TR[T_Q5_1].dot_simd = dot_q5_1_avx2;
    TR[T_Q8_0].dot_simd = dot_q8_0_avx2; TR[T_Q8_0].quant_simd = quant_q8_0_avx2;
    TR[T_Q8_1].quant_simd = quant_q8_1_avx2;
    TR[T_Q4_K].dot_simd = dot_q4_K_avx2; TR[T_Q5_K].dot_simd = dot_q5_K_avx2; TR[T_Q6_K].dot_simd = dot_q6_K_avx2;
    TR[T_Q8_0].dotn_simd = dotn_q8_0_avx2; TR[T_Q4_0].dotn_simd = dotn_q4_0_avx2; TR[T_Q5_0].dotn_simd = dotn_q5_0_avx2;
    TR[T_Q4_K].dotn_simd = dotn_q4_K_avx2; TR[T_Q6_K].dotn_simd = dotn_q6_K_avx2;
    /* Q4_0/Q5_0 only: their unpacking gains from the interleaved chains; the Q8_0 head (a 178 MB stream on
     * Gemma 3) runs faster one row at a time (measured) */
    TR[T_Q4_0].dotr_simd = dotr_q4_0_avx2; TR[T_Q5_0].dotr_simd = dotr_q5_0_avx2;
#endif
    g_simd = g_has_avx2;
}

static inline dot_fn pick_dot(const traits_t *t) { return (g_simd && t->dot_simd) ? t->dot_simd : t->dot_c; }
static inline quant_fn pick_quant(const traits_t *t) { return (g_simd && t->quant_simd) ? t->quant_simd : t->quant_c; }

static int matmul_type(int t) { return t >= 0 && t < T_COUNT && TR[t].dot_c != NULL; }

static inline size_t row_size(int t, int64_t k) { return (size_t)(k / TR[t].blck) * (size_t)TR[t].bytes; }

/* ------------------------------------------------------------------ mul_mat driver */
typedef struct {
    dot_fn dot;
    dotn_fn dotn;
    dotr_fn dotr;
    const uint8_t *w; size_t wrow;
    const uint8_t *xq; size_t xrow;
    float *out;
    int64_t n, t, k, r0, r1;
} job_t;

#define RB 16   /* weight rows per tile: they stay in L1 while every activation row passes */

static void run_job(const job_t *j) {
    for (int64_t r = j->r0; r < j->r1; r += RB) {
        const int64_t re = r + RB < j->r1 ? r + RB : j->r1;
        int64_t t = 0;
        if (j->dotn) {
            for (; t + 1 < j->t; t += NYMAX) {       /* two or more rows left: NYMAX at a time */
                const int m = (int)(j->t - t < NYMAX ? j->t - t : NYMAX);
                const void *ys[NYMAX];
                float res[NYMAX];
                for (int c = 0; c < m; c++) ys[c] = j->xq + (size_t)(t + c) * j->xrow;
                for (int64_t rr = r; rr < re; rr++) {
                    j->dotn((int)j->k, j->w + (size_t)rr * j->wrow, ys, m, res);
                    for (int c = 0; c < m; c++) j->out[(size_t)(t + c) * (size_t)j->n + (size_t)rr] = res[c];
                }
            }
        }
        for (; t < j->t; t++) {
            const uint8_t *xr = j->xq + (size_t)t * j->xrow;
            float *o = j->out + (size_t)t * (size_t)j->n;
            int64_t rr = r;
            if (j->dotr)
                for (; rr + NR <= re; rr += NR) j->dotr((int)j->k, j->w + (size_t)rr * j->wrow, j->wrow, xr, o + rr);
            for (; rr < re; rr++) o[rr] = j->dot((int)j->k, j->w + (size_t)rr * j->wrow, xr);
        }
    }
}

static void *job_thread(void *arg) { run_job((const job_t *)arg); return NULL; }

/* rows [t0, t0 + t) of x against every weight row, activation quantized by q, products by dot/dotn */
static int mul_mat_part(int wt, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out, int nth,
                        dot_fn dot, dotn_fn dotn, dotr_fn dotr, quant_fn q) {
    if (t <= 0) return 0;
    const traits_t *tr = &TR[wt];
    const size_t xrow = row_size(tr->vec_type, k);
    uint8_t *xq = malloc(xrow * (size_t)t + 64);
    if (!xq) return -1;
    for (int64_t i = 0; i < t; i++) q(x + (size_t)i * (size_t)k, xq + (size_t)i * xrow, (int)k);
    job_t base = {dot, t > 1 ? dotn : NULL, dotr, w, row_size(wt, k), xq, xrow, out, n, t, k, 0, n};
    const int64_t work = n * k * t;
    if (nth > n / RB) nth = (int)(n / RB);
    if (nth < 1 || work < (int64_t)1 << 20) nth = 1;
    if (nth == 1) {
        run_job(&base);
    } else {
        job_t jobs[64];
        pthread_t th[64];
        int started[64];
        if (nth > 64) nth = 64;
        const int64_t per = ((n + nth - 1) / nth + RB - 1) / RB * RB;
        int m = 0;
        for (int64_t r = 0; r < n && m < nth; r += per, m++) {
            jobs[m] = base;
            jobs[m].r0 = r;
            jobs[m].r1 = r + per < n ? r + per : n;
        }
        for (int i = 1; i < m; i++) started[i] = pthread_create(&th[i], NULL, job_thread, &jobs[i]) == 0;
        run_job(&jobs[0]);
        for (int i = 1; i < m; i++) {
            if (started[i]) pthread_join(th[i], NULL);
            else run_job(&jobs[i]);
        }
    }
    free(xq);
    return 0;
}

/* Which kernel llama.cpp's CPU backend (AVX2 build, default extra buffer types) runs for a weight of
 * type wt with n rows when the micro-batch has ub activation rows:
 *   ROUTE_REPACK  Q4_K with n % 8 == 0: the weight is repacked at load (q4_K_8x8); rows in groups of
 *                 four go through the gemm kernel, the last ub % 4 rows through the gemv kernel
 *   ROUTE_TILED   other K-quants when ub >= 8 (ggml_compute_forward_mul_mat_tiled)
 *   ROUTE_TINYBLAS  F32 weights when ub >= 2, K % 8 == 0 and N % 4 == 0 (llamafile_sgemm)
 *   ROUTE_VECDOT  the rest (vec_dot; llamafile's tinyBLAS for Q8_0/Q4_0/Q5_0 gives the same numbers) */
enum { ROUTE_VECDOT = 0, ROUTE_REPACK = 1, ROUTE_TILED = 2, ROUTE_TINYBLAS = 3 };

static int mm_route(int wt, int64_t n, int64_t k, int64_t ub) {
    if (wt == T_F32 && ub >= 2 && k % 8 == 0 && n % 4 == 0) return ROUTE_TINYBLAS;  /* llamafile_sgemm, F32 */
    if (wt == T_Q4_K && n % 8 == 0) return ROUTE_REPACK;
    if ((wt == T_Q4_K || wt == T_Q5_K || wt == T_Q6_K) && ub >= 8) return ROUTE_TILED;
    return ROUTE_VECDOT;
}

/* returns 0, or -1 when out of memory. ub: rows of the llama.cpp micro-batch these t rows end; ub == 1 with
 * t > 1: t micro-batches of one row each (decode rows of several sequences), each row computed as it would be
 * alone (the t rows are quantized one by one and every output is the one-row route's dot product) */
static int mul_mat_impl(int wt, const uint8_t *w, int64_t n, int64_t k, const float *x, int64_t t, float *out, int nth,
                        int64_t ub) {
    const traits_t *tr = &TR[wt];
    const quant_fn qref = pick_quant(&TR[tr->vec_type]);
    switch (mm_route(wt, n, k, ub)) {
    case ROUTE_TINYBLAS: {
        dot_fn d = dot_f32_tb_c;
#ifdef PP_X86
        if (g_simd) d = dot_f32_tb_avx2;
#endif
        return mul_mat_part(wt, w, n, k, x, t, out, nth, d, NULL, NULL, qref);
    }
    case ROUTE_REPACK: {
        int64_t g = ub == 1 ? t : ub % 4;  /* one-row micro-batches: every row through the gemv kernel */
        if (g > t) g = t;
        dot_fn dm = dot_q4_K_rpm, dv = dot_q4_K_rpv;
        dotn_fn nm = NULL, nv = NULL;
#ifdef PP_X86
        if (g_simd) { dm = dot_q4_K_rpm_avx2; dv = dot_q4_K_rpv_avx2; nm = dotn_q4_K_rpm_avx2; nv = dotn_q4_K_rpv_avx2; }
#endif
        if (mul_mat_part(wt, w, n, k, x, t - g, out, nth, dm, nm, NULL, quant_q8_K_g4)) return -1;
        return mul_mat_part(wt, w, n, k, x + (size_t)(t - g) * (size_t)k, g, out + (size_t)(t - g) * (size_t)n, nth,
                            dv, nv, NULL, qref);
    }
    case ROUTE_TILED: {
        dot_fn d = wt == T_Q4_K ? dot_q4_K_tl : wt == T_Q5_K ? dot_q5_K_tl : dot_q6_K_tl;
        dotn_fn dn = NULL;
#ifdef PP_X86
        if (g_simd) {
            d = wt == T_Q4_K ? dot_q4_K_tl_avx2 : wt == T_Q5_K ? dot_q5_K_tl_avx2 : dot_q6_K_tl_avx2;
            dn = wt == T_Q4_K ? dotn_q4_K_tl_avx2 : wt == T_Q5_K ? dotn_q5_K_tl_avx2 : dotn_q6_K_tl_avx2;
        }
#endif
        return mul_mat_part(wt, w, n, k, x, t, out, nth, d, dn, NULL, qref);
    }
    default:
        return mul_mat_part(wt, w, n, k, x, t, out, nth, pick_dot(tr), g_simd ? tr->dotn_simd : NULL,
                            g_simd ? tr->dotr_simd : NULL, qref);
    }
}

/* ------------------------------------------------------------------ Python bindings */
static int get_buf(PyObject *o, Py_buffer *b, int writable, const char *what) {
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous%s buffer", what, writable ? " writable" : "");
        return -1;
    }
    return 0;
}

static PyObject *py_mul_mat(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ow, *ox, *oo;
    int wt, nth = 1;
    long long n, k, ub = 0;
    if (!PyArg_ParseTuple(args, "OiLLOO|iL", &ow, &wt, &n, &k, &ox, &oo, &nth, &ub)) return NULL;
    if (!matmul_type(wt)) return PyErr_Format(PyExc_ValueError, "ggml type %d has no quantized matmul", wt);
    if (n <= 0 || k <= 0 || k % TR[wt].blck != 0 || k > (1LL << 30))
        return PyErr_Format(PyExc_ValueError, "bad matmul shape n=%lld k=%lld for block size %d", n, k, TR[wt].blck);
    Py_buffer bw, bx, bo;
    if (get_buf(ow, &bw, 0, "weight") < 0) return NULL;
    if (get_buf(ox, &bx, 0, "x") < 0) { PyBuffer_Release(&bw); return NULL; }
    if (get_buf(oo, &bo, 1, "out") < 0) { PyBuffer_Release(&bw); PyBuffer_Release(&bx); return NULL; }
    PyObject *ret = NULL;
    const long long t = (long long)(bx.len / (Py_ssize_t)(4 * k));
    if ((size_t)bw.len != row_size(wt, k) * (size_t)n) {
        PyErr_Format(PyExc_ValueError, "weight has %zd bytes, a [%lld, %lld] matrix of type %d needs %zu",
                     bw.len, n, k, wt, row_size(wt, k) * (size_t)n);
    } else if (bx.len != (Py_ssize_t)(t * 4 * k) || t < 1) {
        PyErr_Format(PyExc_ValueError, "x has %zd bytes: not a whole number of float32 rows of %lld", bx.len, k);
    } else if (bo.len != (Py_ssize_t)(t * 4 * n)) {
        PyErr_Format(PyExc_ValueError, "out has %zd bytes, [%lld, %lld] float32 needs %lld", bo.len, t, n, t * 4 * n);
    } else {
        int rc;
        Py_BEGIN_ALLOW_THREADS
        rc = mul_mat_impl(wt, bw.buf, n, k, bx.buf, t, bo.buf, nth, ub > 0 ? ub : t);
        Py_END_ALLOW_THREADS
        if (rc != 0) PyErr_NoMemory();
        else ret = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&bw); PyBuffer_Release(&bx); PyBuffer_Release(&bo);
    return ret;
}

static PyObject *py_get_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ow, *oi, *oo;
    int wt;
    long long k;
    if (!PyArg_ParseTuple(args, "OiLOO", &ow, &wt, &k, &oi, &oo)) return NULL;
    if (wt < 0 || wt >= T_COUNT || TR[wt].deq == NULL) return PyErr_Format(PyExc_ValueError, "ggml type %d cannot be dequantized", wt);
    if (k <= 0 || k % TR[wt].blck != 0) return PyErr_Format(PyExc_ValueError, "row length %lld is not a multiple of %d", k, TR[wt].blck);
    Py_buffer bw, bi, bo;
    if (get_buf(ow, &bw, 0, "weight") < 0) return NULL;
    if (get_buf(oi, &bi, 0, "ids") < 0) { PyBuffer_Release(&bw); return NULL; }
    if (get_buf(oo, &bo, 1, "out") < 0) { PyBuffer_Release(&bw); PyBuffer_Release(&bi); return NULL; }
    PyObject *ret = NULL;
    const size_t rs = row_size(wt, k);
    const long long rows = (long long)((size_t)bw.len / rs), nid = (long long)(bi.len / 8);
    if ((size_t)bw.len % rs != 0) {
        PyErr_Format(PyExc_ValueError, "weight has %zd bytes: not whole rows of %zu bytes", bw.len, rs);
    } else if (bi.len % 8 != 0 || bo.len != (Py_ssize_t)(nid * 4 * k)) {
        PyErr_Format(PyExc_ValueError, "ids must be int64 and out float32 [%lld, %lld]", nid, k);
    } else {
        const int64_t *ids = bi.buf;
        long long bad = -1;
        for (long long i = 0; i < nid; i++) if (ids[i] < 0 || ids[i] >= rows) { bad = i; break; }
        if (bad >= 0) {
            PyErr_Format(PyExc_ValueError, "row id %lld outside [0, %lld)", (long long)ids[bad], rows);
        } else {
            for (long long i = 0; i < nid; i++)
                TR[wt].deq((const uint8_t *)bw.buf + (size_t)ids[i] * rs, (float *)bo.buf + (size_t)i * (size_t)k, (int)k);
            ret = Py_NewRef(Py_None);
        }
    }
    PyBuffer_Release(&bw); PyBuffer_Release(&bi); PyBuffer_Release(&bo);
    return ret;
}

static PyObject *py_quantize_act(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oo;
    int wt;
    long long k;
    if (!PyArg_ParseTuple(args, "OiLO", &ox, &wt, &k, &oo)) return NULL;
    if (!matmul_type(wt)) return PyErr_Format(PyExc_ValueError, "ggml type %d has no quantized matmul", wt);
    if (k <= 0 || k % TR[wt].blck != 0) return PyErr_Format(PyExc_ValueError, "row length %lld is not a multiple of %d", k, TR[wt].blck);
    Py_buffer bx, bo;
    if (get_buf(ox, &bx, 0, "x") < 0) return NULL;
    if (get_buf(oo, &bo, 1, "out") < 0) { PyBuffer_Release(&bx); return NULL; }
    const int vt = TR[wt].vec_type;
    const size_t xr = row_size(vt, k);
    const long long t = (long long)(bx.len / (Py_ssize_t)(4 * k));
    PyObject *ret = NULL;
    if (bx.len != (Py_ssize_t)(t * 4 * k) || (size_t)bo.len != xr * (size_t)t) {
        PyErr_Format(PyExc_ValueError, "x must be float32 [T, %lld] and out %zu bytes per row", k, xr);
    } else {
        const quant_fn q = pick_quant(&TR[vt]);
        for (long long i = 0; i < t; i++) q((const float *)bx.buf + (size_t)i * (size_t)k, (uint8_t *)bo.buf + (size_t)i * xr, (int)k);
        ret = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&bx); PyBuffer_Release(&bo);
    return ret;
}

static PyObject *py_row_bytes(PyObject *self, PyObject *args) {
    (void)self;
    int t;
    long long k;
    if (!PyArg_ParseTuple(args, "iL", &t, &k)) return NULL;
    if (t < 0 || t >= T_COUNT || TR[t].blck == 0 || k <= 0 || k % TR[t].blck != 0)
        return PyErr_Format(PyExc_ValueError, "type %d cannot hold rows of %lld", t, k);
    return PyLong_FromSize_t(row_size(t, k));
}

static PyObject *py_vec_dot_type(PyObject *self, PyObject *args) {
    (void)self;
    int t;
    if (!PyArg_ParseTuple(args, "i", &t)) return NULL;
    if (!matmul_type(t)) return PyErr_Format(PyExc_ValueError, "ggml type %d has no quantized matmul", t);
    return PyLong_FromLong(TR[t].vec_type);
}

static PyObject *py_types(PyObject *self, PyObject *noargs) {
    (void)self; (void)noargs;
    PyObject *l = PyList_New(0);
    if (!l) return NULL;
    for (int t = 0; t < T_COUNT; t++) {
        if (!matmul_type(t)) continue;
        PyObject *v = PyLong_FromLong(t);
        if (!v || PyList_Append(l, v) < 0) { Py_XDECREF(v); Py_DECREF(l); return NULL; }
        Py_DECREF(v);
    }
    return l;
}

static PyObject *py_set_simd(PyObject *self, PyObject *args) {
    (void)self;
    int on;
    if (!PyArg_ParseTuple(args, "p", &on)) return NULL;
    const int prev = g_simd;
    if (on && !g_has_avx2) return PyErr_Format(PyExc_ValueError, "this CPU lacks AVX2/FMA/F16C: only the portable kernels run");
    g_simd = on;
    return PyBool_FromLong(prev);
}

static PyObject *py_simd(PyObject *self, PyObject *noargs) { (void)self; (void)noargs; return PyBool_FromLong(g_simd); }
static PyObject *py_has_avx2(PyObject *self, PyObject *noargs) { (void)self; (void)noargs; return PyBool_FromLong(g_has_avx2); }

static PyMethodDef methods[] = {
    {"mul_mat", py_mul_mat, METH_VARARGS, "mul_mat(w, wtype, n, k, x, out, n_threads=1, ubatch=T): out[T, n] = x[T, k] @ w[n, k].T, "
     "by the kernel route llama.cpp takes for a micro-batch of ubatch rows"},
    {"get_rows", py_get_rows, METH_VARARGS, "get_rows(w, wtype, k, ids, out): dequantize rows ids (int64) into out float32"},
    {"quantize_act", py_quantize_act, METH_VARARGS, "quantize_act(x, wtype, k, out): rows of x as wtype's vec_dot_type"},
    {"row_bytes", py_row_bytes, METH_VARARGS, "row_bytes(type, k): bytes of one row of k values"},
    {"vec_dot_type", py_vec_dot_type, METH_VARARGS, "vec_dot_type(wtype): the type activations are quantized to"},
    {"types", py_types, METH_NOARGS, "types(): ggml type ids with a quantized matmul"},
    {"set_simd", py_set_simd, METH_VARARGS, "set_simd(on): use the AVX2 kernels (True) or the portable ones; returns the previous"},
    {"simd", py_simd, METH_NOARGS, "simd(): whether the AVX2 kernels are in use"},
    {"cpu_has_avx2", py_has_avx2, METH_NOARGS, "cpu_has_avx2(): whether the CPU has AVX2, FMA and F16C"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {PyModuleDef_HEAD_INIT, "_qkernels", "Quantized matmul kernels (see csrc/qkernels.c).", -1, methods,
                                    NULL, NULL, NULL, NULL};

PyMODINIT_FUNC PyInit__qkernels(void) {
    init_traits();
    pp_ops_init();
    PyObject *m = PyModule_Create(&moddef);
    if (m && PyModule_AddFunctions(m, pp_ops_methods) < 0) { Py_DECREF(m); return NULL; }
    return m;
}
