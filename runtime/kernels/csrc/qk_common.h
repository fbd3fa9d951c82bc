/*
 * Shared declarations of the _qkernels extension (qkernels.c: quantized matmuls; ops.c: the
 * ggml-faithful elementwise and attention kernels): ggml type ids, block layouts, half/bfloat16
 * conversion, the AVX2 target attribute and the SIMD switch.
 */
#ifndef PP_QK_COMMON_H
#define PP_QK_COMMON_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#if defined(__GNUC__) || defined(__clang__)
#define PP_X86 1
#include <immintrin.h>
#define AVX2_FN __attribute__((target("avx2,fma,f16c")))
#endif
#endif

/* ggml type ids (enum ggml_type) */
enum {
    T_F32 = 0, T_F16 = 1, T_Q4_0 = 2, T_Q4_1 = 3, T_Q5_0 = 6, T_Q5_1 = 7, T_Q8_0 = 8, T_Q8_1 = 9,
    T_Q4_K = 12, T_Q5_K = 13, T_Q6_K = 14, T_Q8_K = 15, T_BF16 = 30, T_COUNT = 40
};

#define QK 32
#define QKK 256
#define NYMAX 4   /* activation rows one multi-row dot product takes */

typedef uint16_t half_t;

typedef struct { half_t d; uint8_t qs[QK / 2]; } blk_q4_0;
typedef struct { half_t d; half_t m; uint8_t qs[QK / 2]; } blk_q4_1;
typedef struct { half_t d; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_0;
typedef struct { half_t d; half_t m; uint8_t qh[4]; uint8_t qs[QK / 2]; } blk_q5_1;
typedef struct { half_t d; int8_t qs[QK]; } blk_q8_0;
typedef struct { half_t d; half_t s; int8_t qs[QK]; } blk_q8_1;
typedef struct { half_t d; half_t dmin; uint8_t scales[12]; uint8_t qs[QKK / 2]; } blk_q4_K;
typedef struct { half_t d; half_t dmin; uint8_t scales[12]; uint8_t qh[QKK / 8]; uint8_t qs[QKK / 2]; } blk_q5_K;
typedef struct { uint8_t ql[QKK / 2]; uint8_t qh[QKK / 4]; int8_t scales[QKK / 16]; half_t d; } blk_q6_K;
typedef struct { float d; int8_t qs[QKK]; int16_t bsums[QKK / 16]; } blk_q8_K;

_Static_assert(sizeof(blk_q4_0) == 18, "q4_0");
_Static_assert(sizeof(blk_q4_1) == 20, "q4_1");
_Static_assert(sizeof(blk_q5_0) == 22, "q5_0");
_Static_assert(sizeof(blk_q5_1) == 24, "q5_1");
_Static_assert(sizeof(blk_q8_0) == 34, "q8_0");
_Static_assert(sizeof(blk_q8_1) == 36, "q8_1");
_Static_assert(sizeof(blk_q4_K) == 144, "q4_K");
_Static_assert(sizeof(blk_q5_K) == 176, "q5_K");
_Static_assert(sizeof(blk_q6_K) == 210, "q6_K");
_Static_assert(sizeof(blk_q8_K) == 292, "q8_K");

/* ------------------------------------------------------------------ half / bfloat16 conversion */
static inline float bits_f32(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static inline uint32_t f32_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

static inline float h2f(half_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0) {
        if (m == 0) return bits_f32(sign);
        return bits_f32(f32_bits((float)m * 5.9604644775390625e-08f) | sign); /* m * 2^-24, exact */
    }
    if (e == 31) return bits_f32(sign | 0x7f800000u | (m << 13));
    return bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

/* IEEE round-to-nearest-even float -> half (what F16C's vcvtps2ph with imm 0 computes). */
static inline half_t f2h(float f) {
    const uint32_t x = f32_bits(f);
    const uint32_t sign = (x >> 16) & 0x8000u;
    const uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (half_t)(sign | 0x7c00u | (ax > 0x7f800000u ? 0x200u : 0u));
    if (ax >= 0x477ff000u) return (half_t)(sign | 0x7c00u);         /* >= 65520 rounds to inf */
    if (ax >= 0x38800000u) {                                        /* normal half */
        const uint32_t r = ax + 0xfffu + ((ax >> 13) & 1u);
        return (half_t)(sign | ((r >> 13) - (112u << 10)));
    }
    if (ax <= 0x33000000u) return (half_t)sign;                     /* <= 2^-25 -> 0 (tie to even) */
    const uint32_t e = ax >> 23, m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t s = 126u - e;                                    /* 14..24 */
    uint32_t q = m >> s;
    const uint32_t rem = m & ((1u << s) - 1u), halfway = 1u << (s - 1u);
    if (rem > halfway || (rem == halfway && (q & 1u))) q++;
    return (half_t)(sign | q);
}

static inline float bf2f(uint16_t b) { return bits_f32((uint32_t)b << 16); }
static inline uint16_t f2bf(float f) {               /* ggml_compute_fp32_to_bf16: RNE, quiet NaN */
    const uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64u);
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

static inline half_t ld_h(const half_t *p) { half_t h; memcpy(&h, p, 2); return h; }

/* round half to even, valid for |v| < 2^22 (ggml nearest_int) */
static inline int nearest_int(float v) {
    const float t = v + 12582912.f;
    int32_t i; memcpy(&i, &t, 4);
    return (i & 0x007fffff) - 0x00400000;
}

extern int g_simd;      /* use the AVX2 kernels (qkernels.c) */
extern int g_has_avx2;  /* the CPU has AVX2, FMA and F16C */

/* ops.c */
extern PyMethodDef pp_ops_methods[];
void pp_ops_init(void);

#endif /* PP_QK_COMMON_H */
