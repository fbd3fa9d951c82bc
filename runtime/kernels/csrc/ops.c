/*
 * The ggml-faithful CPU kernels of pipeplan's CPU table besides the matmuls (qkernels.c):
 * RMS norm, rotary embedding and its cos/sin table, the GELU-tanh gated product, the F16 KV-cache
 * store and attention over the F16 cache. Each reproduces the float operations, and their order,
 * of ggml's CPU backend (AVX2 build) as llama.cpp runs them, so that a model gives llama.cpp's
 * numbers bit for bit; written for pipeplan from the ggml sources' arithmetic, no ggml code copied:
 *
 *   rms_norm    ggml_compute_forward_rms_norm_f32: sum of squares in double, mean rounded to float,
 *               scale = 1 / sqrtf(mean + eps), y = (x * scale) * w.
 *   rope_cache  ggml_rope_cache_init: theta = p, theta *= powf(base, -2 / n_dims) per pair (float),
 *               cosf / sinf of it (freq_scale 1, ext_factor 0, attn_factor 1).
 *   rope        rotate_pairs (NORM: pairs (2i, 2i+1); NEOX: (i, i + n_dims / 2)); GCC contracts
 *               x0 * c - x1 * s to fma(x0, c, -(x1 * s)) and x0 * s + x1 * c to fma(x0, s, x1 * c).
 *   geglu       ggml_vec_geglu_f32 with GGML_GELU_FP16: x <= -10 -> 0, x >= 10 -> x * g, otherwise
 *               a 64K-entry F16 table of gelu_tanh(f16(x)) times g (the table entry is
 *               f16(0.5 x (1 + tanhf(sqrt(2/pi) x fma(0.044715 x, x, 1)))), the contracted form).
 *   attention   build_attn_mha without flash attention: q (times q_scale) rounded to F16, kq = F16 dot
 *               products, softmax_ext (scale, causal / sliding-window mask, ggml_v_expf, block sums
 *               in double, 1/sum), probabilities rounded to F16, kqv = F16 dot products over the cells.
 *               The dot products follow the route ggml takes: one token (decode) -> ggml_vec_dot_f16
 *               (4 x 8 accumulator lanes, index mod 32); two or more tokens in the micro-batch
 *               (prefill) -> llamafile's tinyBLAS (one 8-lane accumulator, index mod 8). Cell c of
 *               the cache holds position c (a single sequence that fits the cache).
 *
 * Every kernel has a portable C form computing the same roundings (fmaf where ggml's AVX2 code
 * fuses); the dot products also have AVX2 forms. This file is compiled with -ffp-contract=off.
 */
#include "qk_common.h"

/* ------------------------------------------------------------------ buffers */
static int ops_buf(PyObject *o, Py_buffer *b, int writable, const char *what) {
    if (PyObject_GetBuffer(o, b, (writable ? PyBUF_WRITABLE : 0) | PyBUF_C_CONTIGUOUS) != 0) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "%s must be a C-contiguous%s buffer", what, writable ? " writable" : "");
        return -1;
    }
    return 0;
}

static void release(Py_buffer *bs, int n) { for (int i = 0; i < n; i++) PyBuffer_Release(&bs[i]); }

/* ------------------------------------------------------------------ rms_norm */
static void rms_norm_rows(const float *x, const float *w, float *y, int64_t rows, int64_t n, float eps) {
    for (int64_t r = 0; r < rows; r++, x += n, y += n) {
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) sum += (double)(x[i] * x[i]);
        const float mean = (float)(sum / (double)n);
        const float scale = 1.0f / sqrtf(mean + eps);
        if (w) for (int64_t i = 0; i < n; i++) y[i] = (x[i] * scale) * w[i];
        else for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale;
    }
}

/* rms_norm(x, w, out, n, eps): rows of n floats; w float32 [n] or None */
static PyObject *py_rms_norm(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *ow, *oo;
    long long n;
    float eps;
    if (!PyArg_ParseTuple(args, "OOOLf", &ox, &ow, &oo, &n, &eps)) return NULL;
    Py_buffer b[3];
    int nb = 0;
    if (ops_buf(ox, &b[nb], 0, "x") < 0) return NULL;
    nb++;
    if (ops_buf(oo, &b[nb], 1, "out") < 0) { release(b, nb); return NULL; }
    nb++;
    const float *w = NULL;
    if (ow != Py_None) {
        if (ops_buf(ow, &b[nb], 0, "weight") < 0) { release(b, nb); return NULL; }
        w = b[nb].buf;
        nb++;
    }
    PyObject *ret = NULL;
    if (n <= 0 || b[0].len % (4 * n) != 0 || b[1].len != b[0].len || (w && b[2].len != 4 * n)) {
        PyErr_Format(PyExc_ValueError, "rms_norm: x (%zd bytes) must be float32 rows of %lld, out the same size, "
                     "weight %lld floats", b[0].len, n, n);
    } else {
        const int64_t rows = b[0].len / (4 * n);
        Py_BEGIN_ALLOW_THREADS
        rms_norm_rows(b[0].buf, w, b[1].buf, rows, n, eps);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
    release(b, nb);
    return ret;
}

/* ------------------------------------------------------------------ rope */
/* cache[p][i] = (cos, sin) of p * base^(-2i/n_dims), theta advanced by repeated float multiplication */
static void rope_cache_fill(float *out, int64_t n_pos, int n_dims, float base) {
    const float theta_scale = powf(base, -2.0f / (float)n_dims);
    for (int64_t p = 0; p < n_pos; p++) {
        float theta = (float)p;
        float *o = out + p * n_dims;
        for (int i = 0; i < n_dims / 2; i++) {
            o[2 * i] = cosf(theta);
            o[2 * i + 1] = sinf(theta);
            theta *= theta_scale;
        }
    }
}

static PyObject *py_rope_cache(PyObject *self, PyObject *args) {
    (void)self;
    long long n_pos;
    int n_dims;
    float base;
    PyObject *oo;
    if (!PyArg_ParseTuple(args, "LifO", &n_pos, &n_dims, &base, &oo)) return NULL;
    Py_buffer b;
    if (ops_buf(oo, &b, 1, "out") < 0) return NULL;
    PyObject *ret = NULL;
    if (n_pos < 1 || n_dims < 2 || n_dims % 2 || b.len != (Py_ssize_t)(n_pos * n_dims * 4)) {
        PyErr_Format(PyExc_ValueError, "rope_cache: out must be float32 [%lld, %d] (even n_dims)", n_pos, n_dims);
    } else {
        Py_BEGIN_ALLOW_THREADS
        rope_cache_fill(b.buf, n_pos, n_dims, base);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
    PyBuffer_Release(&b);
    return ret;
}

/* x, y: [T, H, hd]; cache: [S, n_dims] (cos, sin pairs); rows t at position start + t */
static void rope_rows(const float *x, float *y, const float *cache, int64_t T, int H, int hd, int n_dims,
                      int64_t start, int neox) {
    const int half = n_dims / 2;
    for (int64_t t = 0; t < T; t++) {
        const float *cs = cache + (start + t) * n_dims;
        for (int h = 0; h < H; h++) {
            const float *src = x + (t * H + h) * hd;
            float *dst = y + (t * H + h) * hd;
            for (int i = 0; i < half; i++) {
                const int a = neox ? i : 2 * i, bq = neox ? i + half : 2 * i + 1;
                const float c = cs[2 * i], s = cs[2 * i + 1];
                const float x0 = src[a], x1 = src[bq];
                dst[a] = fmaf(x0, c, -(x1 * s));
                dst[bq] = fmaf(x0, s, x1 * c);
            }
            for (int i = n_dims; i < hd; i++) dst[i] = src[i];
        }
    }
}

/* rope(x, out, cache, n_heads, head_dim, n_dims, start_pos, neox) */
static PyObject *py_rope(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *oo, *oc;
    int H, hd, n_dims, neox;
    long long start;
    if (!PyArg_ParseTuple(args, "OOOiiiLp", &ox, &oo, &oc, &H, &hd, &n_dims, &start, &neox)) return NULL;
    Py_buffer b[3];
    if (ops_buf(ox, &b[0], 0, "x") < 0) return NULL;
    if (ops_buf(oo, &b[1], 1, "out") < 0) { release(b, 1); return NULL; }
    if (ops_buf(oc, &b[2], 0, "cache") < 0) { release(b, 2); return NULL; }
    PyObject *ret = NULL;
    const Py_ssize_t row = (Py_ssize_t)H * hd * 4;
    if (H < 1 || hd < 2 || n_dims < 2 || n_dims % 2 || n_dims > hd || start < 0 || b[0].len % row
        || b[1].len != b[0].len || b[2].len % (n_dims * 4)) {
        PyErr_Format(PyExc_ValueError, "rope: x must be float32 [T, %d, %d], out the same, cache float32 [S, %d]",
                     H, hd, n_dims);
    } else {
        const int64_t T = b[0].len / row, S = b[2].len / (n_dims * 4);
        if (start + T > S) {
            PyErr_Format(PyExc_ValueError, "rope: positions [%lld, %lld) exceed the table (%lld)", start,
                         start + (long long)T, (long long)S);
        } else {
            Py_BEGIN_ALLOW_THREADS
            rope_rows(b[0].buf, b[1].buf, b[2].buf, T, H, hd, n_dims, start, neox);
            Py_END_ALLOW_THREADS
            ret = Py_NewRef(Py_None);
        }
    }
    release(b, 3);
    return ret;
}

/* ------------------------------------------------------------------ geglu */
static half_t g_gelu[1 << 16];

static void gelu_table_init(void) {
    const float a = 0.044715f, s2pi = 0.79788456080286535587989211986876f;
    for (int i = 0; i < (1 << 16); i++) {
        const float x = h2f((half_t)i);
        const float inner = fmaf(a * x, x, 1.0f);
        g_gelu[i] = f2h(0.5f * x * (1.0f + tanhf(s2pi * x * inner)));
    }
}

static void geglu_n(const float *x, const float *g, float *y, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        if (x[i] <= -10.0f) y[i] = 0.0f;
        else if (x[i] >= 10.0f) y[i] = x[i] * g[i];
        else y[i] = h2f(g_gelu[f2h(x[i])]) * g[i];
    }
}

/* geglu(gate, up, out): gelu_tanh(gate) * up, elementwise float32 */
static PyObject *py_geglu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *og, *oo;
    if (!PyArg_ParseTuple(args, "OOO", &ox, &og, &oo)) return NULL;
    Py_buffer b[3];
    if (ops_buf(ox, &b[0], 0, "gate") < 0) return NULL;
    if (ops_buf(og, &b[1], 0, "up") < 0) { release(b, 1); return NULL; }
    if (ops_buf(oo, &b[2], 1, "out") < 0) { release(b, 2); return NULL; }
    PyObject *ret = NULL;
    if (b[0].len % 4 || b[1].len != b[0].len || b[2].len != b[0].len) {
        PyErr_Format(PyExc_ValueError, "geglu: gate, up and out must be float32 of one size");
    } else {
        Py_BEGIN_ALLOW_THREADS
        geglu_n(b[0].buf, b[1].buf, b[2].buf, b[0].len / 4);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
    release(b, 3);
    return ret;
}

/* ------------------------------------------------------------------ swiglu */
/* ggml_vec_swiglu_f32 (AVX2): groups of 8 take ggml_v_silu, x / (1 + ggml_v_expf(0 - x)), times g;
 * the last n % 8 take x / (1 + expf(-x)) * g (libm expf) */
static float expf_ggml(float x);

static void swiglu_n(const float *x, const float *g, float *y, int64_t n) {
    int64_t i = 0;
    const int64_t nv = n & ~(int64_t)7;
    for (; i < nv; i++) y[i] = (x[i] / (1.0f + expf_ggml(0.0f - x[i]))) * g[i];
    for (; i < n; i++) y[i] = (x[i] / (1.0f + expf(-x[i]))) * g[i];
}

/* swiglu(gate, up, out, row): silu(gate) * up on rows of `row` floats */
static PyObject *py_swiglu(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *ox, *og, *oo;
    long long row;
    if (!PyArg_ParseTuple(args, "OOOL", &ox, &og, &oo, &row)) return NULL;
    Py_buffer b[3];
    if (ops_buf(ox, &b[0], 0, "gate") < 0) return NULL;
    if (ops_buf(og, &b[1], 0, "up") < 0) { release(b, 1); return NULL; }
    if (ops_buf(oo, &b[2], 1, "out") < 0) { release(b, 2); return NULL; }
    PyObject *ret = NULL;
    if (row < 1 || b[0].len % (4 * row) || b[1].len != b[0].len || b[2].len != b[0].len) {
        PyErr_Format(PyExc_ValueError, "swiglu: gate, up and out must be float32 rows of %lld, of one size", row);
    } else {
        const int64_t rows = b[0].len / (4 * row);
        Py_BEGIN_ALLOW_THREADS
        for (int64_t r = 0; r < rows; r++)
            swiglu_n((const float *)b[0].buf + r * row, (const float *)b[1].buf + r * row, (float *)b[2].buf + r * row, row);
        Py_END_ALLOW_THREADS
        ret = Py_NewRef(Py_None);
    }
    release(b, 3);
    return ret;
}

/* ------------------------------------------------------------------ F16 rows */
/* f32 -> f16 (round to nearest even, ggml_cpu_fp32_to_fp16) */
static void to_f16(const float *x, half_t *y, int64_t n) {
#ifdef PP_X86
    if (g_simd) {
        extern void pp_to_f16_avx2(const float *, half_t *, int64_t);
        pp_to_f16_avx2(x, y, n);
        return;
    }
#endif
    for (int64_t i = 0; i < n; i++) y[i] = f2h(x[i]);
}

/* kv_store_rows(src, cache, row_elems, start_pos): T rows of row_elems float32 -> cache rows [start, start + T) */
static PyObject *py_kv_store_rows(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *os, *oc;
    long long re, start;
    if (!PyArg_ParseTuple(args, "OOLL", &os, &oc, &re, &start)) return NULL;
    Py_buffer b[2];
    if (ops_buf(os, &b[0], 0, "rows") < 0) return NULL;
    if (ops_buf(oc, &b[1], 1, "cache") < 0) { release(b, 1); return NULL; }
    PyObject *ret = NULL;
    if (re < 1 || start < 0 || b[0].len % (4 * re) || b[1].len % (2 * re)) {
        PyErr_Format(PyExc_ValueError, "kv_store_rows: rows must be float32 [T, %lld], the cache float16 [S, %lld]", re, re);
    } else {
        const int64_t T = b[0].len / (4 * re), S = b[1].len / (2 * re);
        if (start + T > S) {
            PyErr_Format(PyExc_ValueError, "kv_store_rows: positions [%lld, %lld) exceed the cache (%lld)", start,
                         start + (long long)T, (long long)S);
        } else {
            Py_BEGIN_ALLOW_THREADS
            to_f16(b[0].buf, (half_t *)b[1].buf + start * re, T * re);
            Py_END_ALLOW_THREADS
            ret = Py_NewRef(Py_None);
        }
    }
    release(b, 2);
    return ret;
}

/* ------------------------------------------------------------------ F16 dot products */
/* ggml_vec_dot_f16 on AVX2: accumulators acc[j][l] for element 32 i + 8 j + l (fma), reduced as
 * x_l = (acc0 + acc2) + (acc1 + acc3), then ((x0 + x4) + (x1 + x5)) + ((x2 + x6) + (x3 + x7));
 * elements past the last multiple of 32 are added in double. */
static inline float red_vd(const float x[8]) {
    return ((x[0] + x[4]) + (x[1] + x[5])) + ((x[2] + x[6]) + (x[3] + x[7]));
}
/* tinyBLAS hsum of one 8-lane accumulator: ((l0 + l4) + (l2 + l6)) + ((l1 + l5) + (l3 + l7)) */
static inline float red_tb(const float x[8]) {
    return ((x[0] + x[4]) + (x[2] + x[6])) + ((x[1] + x[5]) + (x[3] + x[7]));
}

static float dot_vd_c(int n, const half_t *x, const half_t *y) {
    float acc[4][8] = {{0}};
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 8; l++)
                acc[j][l] = fmaf(h2f(x[i + 8 * j + l]), h2f(y[i + 8 * j + l]), acc[j][l]);
    float s[8];
    for (int l = 0; l < 8; l++) s[l] = (acc[0][l] + acc[2][l]) + (acc[1][l] + acc[3][l]);
    double r = (double)red_vd(s);
    for (int i = np; i < n; i++) r += (double)(h2f(x[i]) * h2f(y[i]));
    return (float)r;
}

/* tinyBLAS (n % 8 == 0): one accumulator, lane = index mod 8 */
static float dot_tb_c(int n, const half_t *x, const half_t *y) {
    float acc[8] = {0};
    for (int i = 0; i < n; i += 8)
        for (int l = 0; l < 8; l++) acc[l] = fmaf(h2f(x[i + l]), h2f(y[i + l]), acc[l]);
    return red_tb(acc);
}

#ifdef PP_X86
AVX2_FN void pp_to_f16_avx2(const float *x, half_t *y, int64_t n) {
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(x + i), 0));
    for (; i < n; i++) y[i] = f2h(x[i]);
}

AVX2_FN static inline __m256 ldh8(const half_t *p) { return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p)); }

AVX2_FN static float dot_vd_avx2(int n, const half_t *x, const half_t *y) {
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
    const int np = n & ~31;
    for (int i = 0; i < np; i += 32) {
        a0 = _mm256_fmadd_ps(ldh8(x + i), ldh8(y + i), a0);
        a1 = _mm256_fmadd_ps(ldh8(x + i + 8), ldh8(y + i + 8), a1);
        a2 = _mm256_fmadd_ps(ldh8(x + i + 16), ldh8(y + i + 16), a2);
        a3 = _mm256_fmadd_ps(ldh8(x + i + 24), ldh8(y + i + 24), a3);
    }
    const __m256 s = _mm256_add_ps(_mm256_add_ps(a0, a2), _mm256_add_ps(a1, a3));
    const __m128 t0 = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    const __m128 t1 = _mm_hadd_ps(t0, t0);
    double r = (double)_mm_cvtss_f32(_mm_hadd_ps(t1, t1));
    for (int i = np; i < n; i++) r += (double)(h2f(x[i]) * h2f(y[i]));
    return (float)r;
}

AVX2_FN static inline float hsum_tb8(__m256 v) {
    __m128 x = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    x = _mm_add_ps(x, _mm_movehl_ps(x, x));
    x = _mm_add_ss(x, _mm_movehdup_ps(x));
    return _mm_cvtss_f32(x);
}

AVX2_FN static float dot_tb_avx2(int n, const half_t *x, const half_t *y) {
    __m256 a = _mm256_setzero_ps();
    for (int i = 0; i < n; i += 8) a = _mm256_fmadd_ps(ldh8(x + i), ldh8(y + i), a);
    return hsum_tb8(a);
}
#endif

typedef float (*hdot_fn)(int, const half_t *, const half_t *);

/* ------------------------------------------------------------------ softmax exp */
/* ggml_v_expf (AVX2 form) for one lane: exp(x) = 2^n (1 + j) with n = round(x log2 e) and a degree-5
 * polynomial j of the reduced argument b; |n| > 126 takes the scaled path (0 or inf at the ends). */
static float expf_ggml(float x) {
    const float r = 0x1.8p23f;
    const float z = fmaf(x, 0x1.715476p+0f, r);
    const float n = z - r;
    const float b = fmaf(-n, 0x1.7f7d1cp-20f, fmaf(-n, 0x1.62e4p-1f, x));
    const uint32_t e = f32_bits(z) << 23;
    const float k = bits_f32(e + f32_bits(1.0f));
    const float u = b * b;
    const float j = fmaf(fmaf(fmaf(0x1.0e4020p-7f, b, 0x1.573e2ep-5f), u, fmaf(0x1.555e66p-3f, b, 0x1.fffdb6p-2f)), u,
                         0x1.ffffecp-1f * b);
    if (!(fabsf(n) > 126.0f)) return fmaf(k, j, k);
    const uint32_t g = (n <= 0.0f) ? 0x82000000u : 0u;
    const float s1 = bits_f32(g + 0x7f000000u), s2 = bits_f32(e - g);
    if (fabsf(n) > 192.0f) return s1 * s1;
    return fmaf(s2, j, s2) * s1;
}

/* ------------------------------------------------------------------ attention */
typedef struct {
    const float *q; const half_t *ck, *cv; float *out;
    int64_t T, start;
    int H, Hkv, dk, dv, window, kq_tb, kqv_tb;
    float scale, q_scale;
} attn_t;

/* one query row t, heads [h0, h1): scratch qh [dk], w [n], pr [n] (n >= p + 1 rounded up to 32), acc [32 * dv] */
static void attn_row(const attn_t *a, int64_t t, half_t *qh, float *w, half_t *pr, float *acc) {
    const int64_t p = a->start + t;
    const int64_t lo = a->window > 0 && p - a->window + 1 > 0 ? p - a->window + 1 : 0;
    const int grp = a->H / a->Hkv;
    hdot_fn kdot = a->kq_tb ? dot_tb_c : dot_vd_c;
#ifdef PP_X86
    if (g_simd) kdot = a->kq_tb ? dot_tb_avx2 : dot_vd_avx2;
#endif
    for (int h = 0; h < a->H; h++) {
        const int g = h / grp;
        const float *qr = a->q + (t * a->H + h) * a->dk;
        if (a->q_scale != 1.0f) { for (int d = 0; d < a->dk; d++) qh[d] = f2h(qr[d] * a->q_scale); }
        else to_f16(qr, qh, a->dk);
        float mx = -INFINITY;
        for (int64_t c = lo; c <= p; c++) {
            const float s = kdot(a->dk, a->ck + (c * a->Hkv + g) * a->dk, qh) * a->scale;
            w[c] = s;
            mx = s > mx ? s : mx;
        }
        /* softmax: blocks of 8 cells from cell 0, exp of (w - max), block sums (tinyBLAS-style hsum) in double */
        double sum = 0.0;
        float val[8];
        for (int64_t b0 = lo & ~(int64_t)7; b0 <= p; b0 += 8) {
            for (int l = 0; l < 8; l++) {
                const int64_t c = b0 + l;
                val[l] = (c >= lo && c <= p) ? expf_ggml(w[c] - mx) : 0.0f;
                if (c >= lo && c <= p) w[c] = val[l];
            }
            sum += (double)red_tb(val);
        }
        const float inv = (float)(1.0 / sum);
        for (int64_t c = lo; c <= p; c++) pr[c] = f2h(w[c] * inv);
        /* kqv: out[d] = sum over cells of v[c][d] * pr[c] in the route's lane order */
        float *o = a->out + (t * a->H + h) * a->dv;
        const int lanes = a->kqv_tb ? 8 : 32;
        memset(acc, 0, sizeof(float) * (size_t)lanes * (size_t)a->dv);
        for (int64_t c = lo; c <= p; c++) {
            const float pc = h2f(pr[c]);
            const half_t *vr = a->cv + (c * a->Hkv + g) * a->dv;
            float *ar = acc + (size_t)(c % lanes) * (size_t)a->dv;
#ifdef PP_X86
            if (g_simd) {
                extern void pp_axpy_h_avx2(int, float, const half_t *, float *);
                pp_axpy_h_avx2(a->dv, pc, vr, ar);
                continue;
            }
#endif
            for (int d = 0; d < a->dv; d++) ar[d] = fmaf(h2f(vr[d]), pc, ar[d]);
        }
        for (int d = 0; d < a->dv; d++) {
            float x[8];
            if (a->kqv_tb) {
                for (int l = 0; l < 8; l++) x[l] = acc[(size_t)l * a->dv + d];
                o[d] = red_tb(x);
            } else {
                for (int l = 0; l < 8; l++)
                    x[l] = (acc[(size_t)l * a->dv + d] + acc[(size_t)(16 + l) * a->dv + d])
                         + (acc[(size_t)(8 + l) * a->dv + d] + acc[(size_t)(24 + l) * a->dv + d]);
                o[d] = red_vd(x);
            }
        }
    }
}

#ifdef PP_X86
/* acc[d] = fma(v[d], p, acc[d]) for d < n (per lane exactly the scalar fmaf) */
AVX2_FN void pp_axpy_h_avx2(int n, float p, const half_t *v, float *acc) {
    const __m256 pv = _mm256_set1_ps(p);
    int d = 0;
    for (; d + 8 <= n; d += 8) _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(ldh8(v + d), pv, _mm256_loadu_ps(acc + d)));
    for (; d < n; d++) acc[d] = fmaf(h2f(v[d]), p, acc[d]);
}
#endif

static int attn_run(const attn_t *a) {
    const int64_t n = a->start + a->T + 32;
    half_t *qh = malloc(sizeof(half_t) * (size_t)a->dk);
    float *w = malloc(sizeof(float) * (size_t)n);
    half_t *pr = malloc(sizeof(half_t) * (size_t)n);
    float *acc = malloc(sizeof(float) * 32 * (size_t)a->dv);
    int rc = 0;
    if (!qh || !w || !pr || !acc) rc = -1;
    else for (int64_t t = 0; t < a->T; t++) attn_row(a, t, qh, w, pr, acc);
    free(qh); free(w); free(pr); free(acc);
    return rc;
}

/* attention(q, cache_k, cache_v, out, n_heads, n_heads_kv, hd_k, hd_v, start_pos, scale, q_scale, window, batch)
 * q float32 [T, H, hd_k]; caches float16 [S, Hkv, hd]; out float32 [T, H * hd_v]; batch: tokens in the
 * micro-batch (>= 2: the tinyBLAS route of prefill) */
static PyObject *py_attention(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *oq, *ock, *ocv, *oo;
    int H, Hkv, dk, dv, window;
    long long start, batch;
    float scale, q_scale;
    if (!PyArg_ParseTuple(args, "OOOOiiiiLffiL", &oq, &ock, &ocv, &oo, &H, &Hkv, &dk, &dv, &start, &scale, &q_scale,
                          &window, &batch)) return NULL;
    Py_buffer b[4];
    if (ops_buf(oq, &b[0], 0, "q") < 0) return NULL;
    if (ops_buf(ock, &b[1], 0, "cache_k") < 0) { release(b, 1); return NULL; }
    if (ops_buf(ocv, &b[2], 0, "cache_v") < 0) { release(b, 2); return NULL; }
    if (ops_buf(oo, &b[3], 1, "out") < 0) { release(b, 3); return NULL; }
    PyObject *ret = NULL;
    const Py_ssize_t qrow = (Py_ssize_t)H * dk * 4, krow = (Py_ssize_t)Hkv * dk * 2, vrow = (Py_ssize_t)Hkv * dv * 2;
    if (H < 1 || Hkv < 1 || H % Hkv || dk < 1 || dv < 1 || start < 0 || window < 0 || b[0].len % qrow
        || b[1].len % krow || b[2].len % vrow || b[1].len / krow != b[2].len / vrow
        || b[3].len != (b[0].len / qrow) * (Py_ssize_t)H * dv * 4) {
        PyErr_Format(PyExc_ValueError, "attention: q must be float32 [T, %d, %d], the caches float16 [S, %d, %d|%d] "
                     "of one S, out float32 [T, %d]", H, dk, Hkv, dk, dv, H * dv);
    } else {
        const int64_t T = b[0].len / qrow, S = b[1].len / krow;
        if (T < 1 || start + T > S) {
            PyErr_Format(PyExc_ValueError, "attention: positions [%lld, %lld) exceed the cache (%lld)", start,
                         start + (long long)T, (long long)S);
        } else {
            attn_t a = {b[0].buf, b[1].buf, b[2].buf, b[3].buf, T, start, H, Hkv, dk, dv, window,
                        batch >= 2 && dk % 8 == 0, batch >= 2 && dv % 4 == 0, scale, q_scale};
            int rc;
            Py_BEGIN_ALLOW_THREADS
            rc = attn_run(&a);
            Py_END_ALLOW_THREADS
            if (rc) PyErr_NoMemory();
            else ret = Py_NewRef(Py_None);
        }
    }
    release(b, 4);
    return ret;
}

/* ------------------------------------------------------------------ module */
PyMethodDef pp_ops_methods[] = {
    {"rms_norm", py_rms_norm, METH_VARARGS, "rms_norm(x, w|None, out, n, eps): ggml rms_norm (+ mul) of rows of n"},
    {"rope_cache", py_rope_cache, METH_VARARGS, "rope_cache(n_pos, n_dims, base, out): ggml's cos/sin per position"},
    {"rope", py_rope, METH_VARARGS, "rope(x, out, cache, n_heads, head_dim, n_dims, start_pos, neox)"},
    {"geglu", py_geglu, METH_VARARGS, "geglu(gate, up, out): ggml_vec_geglu_f32 (F16 GELU table)"},
    {"swiglu", py_swiglu, METH_VARARGS, "swiglu(gate, up, out, row): ggml_vec_swiglu_f32 on rows of row floats"},
    {"kv_store_rows", py_kv_store_rows, METH_VARARGS, "kv_store_rows(rows, cache, row_elems, start_pos): f32 -> f16 rows"},
    {"attention", py_attention, METH_VARARGS,
     "attention(q, cache_k, cache_v, out, H, Hkv, hd_k, hd_v, start_pos, scale, q_scale, window, batch)"},
    {NULL, NULL, 0, NULL},
};

void pp_ops_init(void) { gelu_table_init(); }
