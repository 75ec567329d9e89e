/* The report's native reader of a Kineto (torch.profiler) trace's events, for reports/kineto_native.py.

Python keeps the file: it opens and inflates it, reads the text before `"traceEvents": [` and the keys after the
list, with the Python reader's own checks. This file reads the events in between, fed block by block (ks_feed; an
event cut by the end of a block is kept and completed by the next one), into columns: GPU events, CPU operators and
annotations, runtime calls, collectives' args (raw text), [memory] peaks. Names, categories and shape arguments are
interned as their raw JSON text (quotes included); Python decodes the few distinct ones.

Strict by construction: only the JSON that torch/Kineto writes is read. Anything the scanner is not sure the Python
reader treats the same way (a duplicate key, a string where a number goes, a time with a sign, an exponent or more
than three decimals, an escape in a key, a category or a [memory] name, control bytes, invalid UTF-8, deep nesting,
huge numbers...) makes the status KS_FOREIGN: Python's reader then reads the whole file, errors included.
Times are exact integer nanoseconds from the decimal microseconds (at most three decimals: no rounding needed).
Plain C11.
*/
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3") /* the build helper's -O2 is shared; O3 reads ~20% faster here (inlining) */
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define KS_MORE 0
#define KS_FOREIGN 1
#define KS_NOMEM 2
#define KS_DONE 3

#define R_OK 1
#define R_FOREIGN 0
#define R_MORE -1
#define NUL64 INT64_MIN /* an absent value in an integer column */
#define MAX_DEPTH 32
#define MAX_DEVICES 4096

/* tables and their columns (kineto_native.py names them) */
enum { T_KERNEL, T_COPY, T_HOST, T_RUNTIME, T_COMM, T_MEMORY, T_DEVICE, T_N };
enum { G_NAME, G_DEVICE, G_START, G_END, G_STREAM, G_CORR, G_EXT, G_N };
enum { H_NAME, H_CAT, H_PID, H_TID, H_START, H_END, H_EXT, H_DIMS, H_TYPES, H_STRIDES, H_CONCRETE, H_N };
enum { R_NAME, R_CAT, R_PID, R_TID, R_START, R_END, R_CORR, R_EXT, RT_N };
enum { C_ROW, C_ARGS, C_N };
enum { M_ALLOC, M_TYPE, M_ID, M_N };
/* interned string sets */
enum { S_GPU, S_HOST, S_CAT, S_SHAPE, S_COMM, S_N };
/* what a category is read as (kinds given by Python at ks_new) */
enum { K_SKIP = 0, K_KERNEL = 1, K_COPY = 2, K_HOST = 3, K_RUNTIME = 4 };

typedef struct { void *data; int size; } col_t;
typedef struct { col_t cols[H_N]; int ncols; int64_t n, cap; } table_t;

typedef struct { const char *ptr; int64_t len; uint64_t hash; } str_t;
typedef struct {
    str_t *items; int64_t count, cap;
    int32_t *slots; int64_t nslots;
} strset_t;

typedef struct arena_block { struct arena_block *next; size_t used, cap; char data[]; } arena_block;

typedef struct {
    int status;
    char reason[200];
    int state;          /* 0: before the first event, 1: after an event */
    int64_t offset;     /* bytes of events consumed so far (for the reason) */
    table_t tables[T_N];
    strset_t sets[S_N];
    int8_t *cat_kind; int64_t cat_kind_cap;
    char *kinds_spec; int64_t kinds_len;
    arena_block *arena;
    char *carry; int64_t carry_len, carry_cap;
    char *tail; int64_t tail_len;
    int32_t last_cat;   /* the category of the last event read, or -1 */
} ks_t;

static const int COL_SIZES[T_N][H_N] = {
    [T_KERNEL] = {4, 4, 8, 8, 8, 8, 8},
    [T_COPY] = {4, 4, 8, 8, 8, 8, 8},
    [T_HOST] = {4, 4, 8, 8, 8, 8, 8, 4, 4, 4, 4},
    [T_RUNTIME] = {4, 4, 8, 8, 8, 8, 8, 8},
    [T_COMM] = {8, 4},
    [T_MEMORY] = {8, 8, 8},
    [T_DEVICE] = {8},
};
static const int NCOLS[T_N] = {G_N, G_N, H_N, RT_N, C_N, M_N, 1};

static int foreign(ks_t *t, const char *why) {
    if (t->status == KS_MORE) {
        t->status = KS_FOREIGN;
        snprintf(t->reason, sizeof t->reason, "%s (event near byte %lld of the list)", why, (long long)t->offset);
    }
    return R_FOREIGN;
}

/* ------------------------------------------------------------------ storage */
static char *arena_copy(ks_t *t, const char *p, int64_t n) {
    arena_block *b = t->arena;
    if (!b || b->cap - b->used < (size_t)n) {
        size_t cap = (size_t)n > (1u << 20) ? (size_t)n : (1u << 20);
        arena_block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->next = b; nb->used = 0; nb->cap = cap;
        t->arena = b = nb;
    }
    char *out = b->data + b->used;
    memcpy(out, p, (size_t)n);
    b->used += (size_t)n;
    return out;
}

static uint64_t hash_bytes(const char *p, int64_t n) {
    uint64_t h = 1469598103934665603ULL;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w; memcpy(&w, p + i, 8);
        h = (h ^ w) * 1099511628211ULL; h ^= h >> 29;
    }
    for (; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ULL;
    return h ^ (h >> 31);
}

static int set_grow(strset_t *s) {
    int64_t nslots = s->nslots ? s->nslots * 2 : 1024;
    int32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots) return -1;
    for (int64_t i = 0; i < nslots; i++) slots[i] = -1;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t j = (int64_t)(s->items[i].hash & (uint64_t)(nslots - 1));
        while (slots[j] >= 0) j = (j + 1) & (nslots - 1);
        slots[j] = (int32_t)i;
    }
    free(s->slots); s->slots = slots; s->nslots = nslots;
    return 0;
}

/* id of the text (copied on first sight), in first-seen order; -1: no memory */
static int32_t intern(ks_t *t, int which, const char *p, int64_t n) {
    strset_t *s = &t->sets[which];
    if (s->count * 2 >= s->nslots && set_grow(s)) return -1;
    if (s->count >= INT32_MAX - 1) return -1;
    uint64_t h = hash_bytes(p, n);
    int64_t j = (int64_t)(h & (uint64_t)(s->nslots - 1));
    while (s->slots[j] >= 0) {
        str_t *e = &s->items[s->slots[j]];
        if (e->hash == h && e->len == n && memcmp(e->ptr, p, (size_t)n) == 0) return s->slots[j];
        j = (j + 1) & (s->nslots - 1);
    }
    if (s->count == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 256;
        str_t *grown = realloc(s->items, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        s->items = grown; s->cap = cap;
    }
    char *copy = arena_copy(t, p, n);
    if (!copy) return -1;
    s->items[s->count] = (str_t){copy, n, h};
    s->slots[j] = (int32_t)s->count;
    return (int32_t)s->count++;
}

/* room for one more row; the row's index, or -1 on no memory */
static int64_t add_row(table_t *tb) {
    if (tb->n == tb->cap) {
        int64_t cap = tb->cap ? tb->cap * 2 : 4096;
        for (int i = 0; i < tb->ncols; i++) {
            void *g = realloc(tb->cols[i].data, (size_t)cap * (size_t)tb->cols[i].size);
            if (!g) return -1;
            tb->cols[i].data = g;
        }
        tb->cap = cap;
    }
    return tb->n++;
}

#define I64(tb, col, row) (((int64_t *)(tb)->cols[col].data)[row])
#define I32(tb, col, row) (((int32_t *)(tb)->cols[col].data)[row])

/* ------------------------------------------------------------------ lexing (RFC 8259, minus what Kineto never writes) */
/* The cursor; where SSE2 is, with masks of the 64 bytes at sbase (computed once for them): the end of a string or of
   blanks is then a shift of a mask, not loads and compares on every token's critical path. */
typedef struct { const char *p, *end; uintptr_t sbase; uint64_t special, quotes, blank; } cur_t;

/* The lexing functions always inlined, their cursor a local of the function reading an object: its pointer then
   stays in a register (a cursor in memory puts a store and a reload on every token's path, which dominated). A call
   that cannot be inlined (a nested object or list) gets a copy. */
#if defined(__GNUC__)
#define HOT static inline __attribute__((always_inline))
#else
#define HOT static inline
#endif

static int8_t CLASS[256];  /* 0 plain, 1 quote, 2 backslash, 3 control, 4 non-ASCII */
static uint8_t WS[256];    /* JSON's four whitespace bytes */

static void init_class(void) {
    for (int i = 0; i < 256; i++) CLASS[i] = i < 0x20 ? 3 : i >= 0x80 ? 4 : 0;
    CLASS['"'] = 1; CLASS['\\'] = 2;
    WS[' '] = WS['\n'] = WS['\t'] = WS['\r'] = 1;
}

#ifdef __SSE2__
/* the masks of the 64 bytes at s (s + 64 <= end): quotes; every byte that ends a string's plain run (a quote, a
   backslash, a control or non-ASCII byte: < 0x20 or >= 0x80 signed); blanks */
HOT void classify(cur_t *c, const unsigned char *s) {
    const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
    const __m128i nl = _mm_set1_epi8('\n'), tab = _mm_set1_epi8('\t'), cr = _mm_set1_epi8('\r');
    uint64_t special = 0, quotes = 0, blank = 0;
    for (int i = 0; i < 4; i++) {
        __m128i v = _mm_loadu_si128((const __m128i *)(s + 16 * i));
        __m128i q = _mm_cmpeq_epi8(v, quote);
        __m128i x = _mm_or_si128(_mm_or_si128(q, _mm_cmpeq_epi8(v, slash)), _mm_cmplt_epi8(v, space));
        __m128i w = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, space), _mm_cmpeq_epi8(v, nl)),
                                 _mm_or_si128(_mm_cmpeq_epi8(v, tab), _mm_cmpeq_epi8(v, cr)));
        special |= (uint64_t)(unsigned)_mm_movemask_epi8(x) << (16 * i);
        quotes |= (uint64_t)(unsigned)_mm_movemask_epi8(q) << (16 * i);
        blank |= (uint64_t)(unsigned)_mm_movemask_epi8(w) << (16 * i);
    }
    c->sbase = (uintptr_t)s; c->special = special; c->quotes = quotes; c->blank = blank;
}

/* the cursor's masks cover p (computed there if they did not); 0 near the end of the buffer */
HOT int covered(cur_t *c, const char *p, uint64_t *off) {
    *off = (uintptr_t)p - c->sbase;
    if (*off < 64) return 1;
    if (c->end - p < 64) return 0;
    classify(c, (const unsigned char *)p);
    *off = 0;
    return 1;
}
#endif

HOT int skip_ws(cur_t *c) {  /* R_MORE at the end of the buffer */
    const char *p = c->p, *end = c->end;
    /* most tokens follow no blank or a single space (every blank is <= 0x20, as are the control bytes refused) */
    if (p < end && (unsigned char)*p > ' ') return R_OK;
    if (p + 1 < end && *p == ' ' && (unsigned char)p[1] > ' ') { c->p = p + 1; return R_OK; }
#ifdef __SSE2__
    uint64_t off;
    while (covered(c, p, &off)) {  /* Kineto indents its events: runs of blanks */
        uint64_t other = ~c->blank >> off;
        if (other) { c->p = p + __builtin_ctzll(other); return R_OK; }
        p = (const char *)c->sbase + 64;
    }
#endif
    while (p < end && WS[(unsigned char)*p]) p++;
    c->p = p;
    return p < end ? R_OK : R_MORE;
}

static inline int hexval(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}


/* A string at c->p (a quote): its span, quotes included; *bs when it holds an escape. */
HOT int string_tok(ks_t *t, cur_t *c, const char **start, int64_t *len, int *bs) {
    const unsigned char *p = (const unsigned char *)c->p + 1, *end = (const unsigned char *)c->end;
    *bs = 0;
    for (;;) {
#ifdef __SSE2__
        for (;;) {  /* the first byte that ends the plain run, by the masks */
            uint64_t off = (uintptr_t)p - c->sbase;
            if (off < 64) {
                uint64_t bits = c->special >> off;
                if (bits) {
                    p += __builtin_ctzll(bits);
                    if ((c->quotes >> off) & bits & -bits) goto closed;  /* the closing quote */
                    break;
                }
                p = (const unsigned char *)c->sbase + 64;
            }
            if (end - p < 64) break;
            classify(c, p);
        }
        /* 16 bytes at a time: the first quote, backslash, control or non-ASCII byte (signed: < 0x20 or >= 0x80) */
        const __m128i quote = _mm_set1_epi8('"'), slash = _mm_set1_epi8('\\'), space = _mm_set1_epi8(0x20);
        while (p + 16 <= end) {
            __m128i v = _mm_loadu_si128((const __m128i *)p);
            __m128i q = _mm_cmpeq_epi8(v, quote);
            unsigned mask = (unsigned)_mm_movemask_epi8(_mm_or_si128(_mm_or_si128(q, _mm_cmpeq_epi8(v, slash)),
                                                                      _mm_cmplt_epi8(v, space)));
            if (mask) {
                unsigned first = mask & -mask;
                p += __builtin_ctz(mask);
                if (first & (unsigned)_mm_movemask_epi8(q)) goto closed;  /* the closing quote: no byte to reload */
                break;
            }
            p += 16;
        }
#endif
        while (p < end && CLASS[*p] == 0) p++;
        if (p >= end) return R_MORE;
        int k = CLASS[*p];
        if (k == 1) break;
        if (k == 3) return foreign(t, "a control byte in a string");
        if (k == 2) {
            *bs = 1;
            if (p + 1 >= end) return R_MORE;
            unsigned char e = p[1];
            if (e == 'u') {
                if (p + 6 > end) return R_MORE;
                int v = 0;
                for (int i = 2; i < 6; i++) {
                    int h = hexval((char)p[i]);
                    if (h < 0) return foreign(t, "a bad \\u escape");
                    v = v * 16 + h;
                }
                if (v >= 0xD800 && v <= 0xDFFF) return foreign(t, "a surrogate escape");
                p += 6;
            } else if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                       e == 't') {
                p += 2;
            } else {
                return foreign(t, "a bad escape");
            }
            continue;
        }
        /* UTF-8, strictly: no overlong forms, no surrogates, at most U+10FFFF */
        unsigned char b0 = *p;
        int n = b0 >= 0xC2 && b0 <= 0xDF ? 2 : b0 >= 0xE0 && b0 <= 0xEF ? 3 : b0 >= 0xF0 && b0 <= 0xF4 ? 4 : 0;
        if (!n) return foreign(t, "invalid UTF-8");
        if (p + n > end) return R_MORE;
        for (int i = 1; i < n; i++)
            if ((p[i] & 0xC0) != 0x80) return foreign(t, "invalid UTF-8");
        if ((b0 == 0xE0 && p[1] < 0xA0) || (b0 == 0xED && p[1] >= 0xA0) || (b0 == 0xF0 && p[1] < 0x90) ||
            (b0 == 0xF4 && p[1] >= 0x90))
            return foreign(t, "invalid UTF-8");
        p += n;
    }
#ifdef __SSE2__
closed:
#endif
    *start = c->p;
    *len = (const char *)p + 1 - c->p;
    c->p = (const char *)p + 1;
    return R_OK;
}

enum { N_INT, N_BIG, N_FLOAT };
typedef struct { int kind; int64_t value; int time_ok; int64_t ns; } num_t;

/* How many ASCII digits start at p (up to the end of the buffer) */
HOT int64_t digit_run(cur_t *c, const char *p) {
    const char *q = p, *end = c->end;
    while (q + 8 <= end) {
        uint64_t x; memcpy(&x, q, 8);
        x ^= 0x3030303030303030ULL;
        uint64_t other = ((x + 0x0606060606060606ULL) | x) & 0xF0F0F0F0F0F0F0F0ULL;
        if (other) return q - p + (__builtin_ctzll(other) >> 3);
        q += 8;
    }
    while (q < end && (unsigned char)(*q - '0') < 10) q++;
    return q - p;
}

/* A JSON number: an integer within int64 (N_INT), beyond it (N_BIG), or with a fraction or exponent (N_FLOAT);
   time_ok and ns: it is Kineto's microseconds (no sign or exponent, at most three decimals, within int64 ns), as exact ns.
   With out NULL the number is only checked (a skipped value). */
HOT int number_tok(ks_t *t, cur_t *c, num_t *out) {
    const char *p = c->p, *end = c->end;
    int neg = 0;
    if (*p == '-') { neg = 1; p++; }
    const char *digits = p;
    uint64_t v = 0;  /* the integer part, exact up to 19 digits (< 2^64); a longer one is N_BIG whatever v wraps to */
    if (out) {
        while (p < end && (unsigned char)(*p - '0') < 10) { v = v * 10 + (uint64_t)(*p - '0'); p++; }
    } else {
        p += digit_run(c, p);
    }
    if (p >= end) return R_MORE;
    int64_t nd = p - digits;
    if (nd == 0 || (nd > 1 && *digits == '0')) return foreign(t, "not a JSON number");
    if (nd > 40) return foreign(t, "a number too long");
    const char *frac = NULL; int64_t nf = 0;
    if (*p == '.') {
        frac = ++p;
        p += digit_run(c, p);
        if (p >= end) return R_MORE;
        nf = p - frac;
        if (nf == 0) return foreign(t, "not a JSON number");
        if (nf > 40) return foreign(t, "a number too long");
    }
    int exp = 0;
    if (*p == 'e' || *p == 'E') {
        exp = 1; p++;
        if (p >= end) return R_MORE;
        if (*p == '+' || *p == '-') p++;
        const char *ed = p;
        while (p < end && *p >= '0' && *p <= '9') p++;
        if (p >= end) return R_MORE;
        if (p == ed) return foreign(t, "not a JSON number");
        if (p - ed > 4) return foreign(t, "a number too long");
    }
    if (!out && neg && nd == 19)  /* a skipped number's value matters only here */
        for (const char *d = digits; d < digits + nd; d++) v = v * 10 + (uint64_t)(*d - '0');
    int big = nd > 19 || v > (uint64_t)INT64_MAX;  /* -2^63 too: the readers differ on it, see below */
    if (!frac && !exp && big && neg && nd <= 19 && v == (uint64_t)INT64_MAX + 1) return foreign(t, "-2^63");
    if (out) {
        out->time_ok = 0;
        if (!frac && !exp) {
            if (big) out->kind = N_BIG;
            else { out->kind = N_INT; out->value = neg ? -(int64_t)v : (int64_t)v; }
        } else {
            out->kind = N_FLOAT;
        }
        if (!neg && !exp && nd <= 16 && nf <= 3 && v <= (uint64_t)(INT64_MAX - 999) / 1000) {
            int64_t f = 0;
            for (int i = 0; i < 3; i++) f = f * 10 + (i < nf ? frac[i] - '0' : 0);
            out->time_ok = 1;
            out->ns = (int64_t)v * 1000 + f;
        }
    }
    c->p = p;
    return R_OK;
}

HOT int literal(ks_t *t, cur_t *c, const char *word, int n) {
    if (c->end - c->p < n) return memcmp(c->p, word, (size_t)(c->end - c->p)) == 0 ? R_MORE : foreign(t, "bad literal");
    if (memcmp(c->p, word, (size_t)n) != 0) return foreign(t, "not JSON");
    c->p += n;
    return R_OK;
}

/* value forms, as the readers see them */
enum { V_ABSENT, V_NULL, V_INT, V_BIG, V_FLOAT, V_STR, V_BOOL, V_LIST, V_OBJ };
typedef struct { int form; int64_t value; const char *s; int64_t n; int bs; int time_ok; int64_t ns; } val_t;

/* A JSON value other than a list or an object at c->p, checked as value() checks it and passed over. */
HOT int skip_scalar(ks_t *t, cur_t *c) {
    char ch = *c->p;
    if (ch == '"') { const char *s; int64_t n; int bs; return string_tok(t, c, &s, &n, &bs); }
    if (ch == '-' || (ch >= '0' && ch <= '9')) return number_tok(t, c, NULL);
    if (ch == 'n') return literal(t, c, "null", 4);
    if (ch == 't') return literal(t, c, "true", 4);
    if (ch == 'f') return literal(t, c, "false", 5);
    return foreign(t, "not a JSON value");
}

/* The list or object at c->p (at `depth`), checked and passed over; nested ones in the same loop (a bit per level
   says list or object), so a shape's inner lists cost no call. */
static int skip_container(ks_t *t, cur_t *cp, int depth) {
    cur_t c = *cp;
    uint64_t objects = 0;  /* bit i: the container open at level i is an object */
    int level = 0, r;
open:  /* c.p at a [ or { */
    if (depth + level >= MAX_DEPTH) { r = foreign(t, "nested too deeply"); goto out; }
    if (*c.p == '{') objects |= 1ULL << level; else objects &= ~(1ULL << level);
    level++;
    c.p++;
    if ((r = skip_ws(&c)) != R_OK) goto out;
    if (*c.p == (objects >> (level - 1) & 1 ? '}' : ']')) { c.p++; goto closed; }
    for (;;) {
        if (objects >> (level - 1) & 1) {
            const char *ks; int64_t kn; int bs;
            if (*c.p != '"') { r = foreign(t, "not JSON (a key)"); goto out; }
            if ((r = string_tok(t, &c, &ks, &kn, &bs)) != R_OK) goto out;
            if ((r = skip_ws(&c)) != R_OK) goto out;
            if (*c.p != ':') { r = foreign(t, "not JSON (no colon)"); goto out; }
            c.p++;
            if ((r = skip_ws(&c)) != R_OK) goto out;
        }
        if (*c.p == '[' || *c.p == '{') goto open;
        if ((r = skip_scalar(t, &c)) != R_OK) goto out;
    next:  /* after a member */
        if ((r = skip_ws(&c)) != R_OK) goto out;
        if (*c.p == (objects >> (level - 1) & 1 ? '}' : ']')) { c.p++; goto closed; }
        if (*c.p != ',') { r = foreign(t, "not JSON (no comma)"); goto out; }
        c.p++;
        if ((r = skip_ws(&c)) != R_OK) goto out;
        continue;
    closed:
        if (--level == 0) { r = R_OK; goto out; }
        goto next;
    }
out:
    *cp = c;
    return r;
}

/* Any JSON value at c->p (no whitespace before it), checked as value() checks it and passed over. */
HOT int skip_value(ks_t *t, cur_t *c, int depth) {
    if (*c->p == '[' || *c->p == '{') {
        cur_t sub = *c;
        int r = skip_container(t, &sub, depth);
        *c = sub;
        return r;
    }
    return skip_scalar(t, c);
}

/* Any JSON value at c->p (no whitespace before it): its form, its number, or its span (strings: quotes included;
   lists and objects: the whole text). */
HOT int value(ks_t *t, cur_t *c, val_t *v, int depth) {
    const char *start = c->p;
    int r;
    char ch = *c->p;
    v->bs = 0; v->time_ok = 0;
    if (ch == '"') {
        v->form = V_STR;
        return string_tok(t, c, &v->s, &v->n, &v->bs);
    }
    if (ch == '-' || (ch >= '0' && ch <= '9')) {
        num_t num = {0, 0, 0, 0};
        if ((r = number_tok(t, c, &num)) != R_OK) return r;
        v->form = num.kind == N_INT ? V_INT : num.kind == N_BIG ? V_BIG : V_FLOAT;
        v->value = num.value; v->time_ok = num.time_ok; v->ns = num.ns;
    } else if (ch == '[' || ch == '{') {
        cur_t sub = *c;
        r = skip_container(t, &sub, depth);
        *c = sub;
        if (r != R_OK) return r;
        v->form = ch == '[' ? V_LIST : V_OBJ;
    } else if (ch == 'n') {
        if ((r = literal(t, c, "null", 4)) != R_OK) return r;
        v->form = V_NULL;
    } else if (ch == 't') {
        if ((r = literal(t, c, "true", 4)) != R_OK) return r;
        v->form = V_BOOL;
    } else if (ch == 'f') {
        if ((r = literal(t, c, "false", 5)) != R_OK) return r;
        v->form = V_BOOL;
    } else {
        return foreign(t, "not a JSON value");
    }
    v->s = start; v->n = c->p - start;
    return R_OK;
}

/* ------------------------------------------------------------------ one event */
enum { E_PH, E_CAT, E_NAME, E_PID, E_TID, E_TS, E_DUR, E_ARGS, E_N };
/* the args read; the others (Sequence number, Fwd thread id... which no table keeps) are checked and skipped */
enum { A_DEVICE, A_STREAM, A_CORR, A_EXT, A_DIMS, A_TYPES, A_STRIDES, A_CONCRETE, A_ALLOC, A_DTYPE, A_DID, A_N };

typedef struct { val_t e[E_N]; val_t a[A_N]; } event_t;

#define IS(s, word) (memcmp((s), word, sizeof word - 1) == 0) /* s (of the length of word) is the word */

/* Which of E_* the key s[0:n] (quotes excluded) is, or -1: a switch on the length, then one comparison. */
static inline int event_key(const char *s, int64_t n) {
    switch (n) {
    case 2: return IS(s, "ph") ? E_PH : IS(s, "ts") ? E_TS : -1;
    case 3:
        switch (s[0]) {
        case 'c': return IS(s, "cat") ? E_CAT : -1;
        case 'p': return IS(s, "pid") ? E_PID : -1;
        case 't': return IS(s, "tid") ? E_TID : -1;
        case 'd': return IS(s, "dur") ? E_DUR : -1;
        default: return -1;
        }
    case 4: return IS(s, "name") ? E_NAME : IS(s, "args") ? E_ARGS : -1;
    default: return -1;
    }
}

static inline int arg_key(const char *s, int64_t n) {
    switch (n) {
    case 6: return IS(s, "device") ? A_DEVICE : IS(s, "stream") ? A_STREAM : -1;
    case 9: return IS(s, "Device Id") ? A_DID : -1;
    case 10: return IS(s, "Input Dims") ? A_DIMS : IS(s, "Input type") ? A_TYPES : -1;
    case 11: return IS(s, "correlation") ? A_CORR : IS(s, "External id") ? A_EXT : IS(s, "Device Type") ? A_DTYPE : -1;
    case 13: return IS(s, "Input Strides") ? A_STRIDES : -1;
    case 15: return IS(s, "Concrete Inputs") ? A_CONCRETE : IS(s, "Total Allocated") ? A_ALLOC : -1;
    default: return -1;
    }
}

/* An object's members: the event's (args_out NULL: the args') keys into out[] (each at most once), the others
   checked and skipped; an event's `args` object is read in the same pass, its members into args_out[]. */
static int members(ks_t *t, cur_t *cp, val_t *out, int nkeys, int depth, val_t *args_out);

HOT int members_in(ks_t *t, cur_t *c, val_t *out, int nkeys, int depth, val_t *args_out) {
    int r;
    for (int i = 0; i < nkeys; i++) { out[i].form = V_ABSENT; out[i].time_ok = 0; }  /* all absent, no time */
    c->p++;  /* the { */
    if ((r = skip_ws(c)) != R_OK) return r;
    if (*c->p == '}') { c->p++; return R_OK; }
    for (;;) {
        const char *ks; int64_t kn; int bs;
        if (*c->p != '"') return foreign(t, "not JSON (a key)");
        if ((r = string_tok(t, c, &ks, &kn, &bs)) != R_OK) return r;
        if (bs) return foreign(t, "an escape in a key");
        if ((r = skip_ws(c)) != R_OK) return r;
        if (*c->p != ':') return foreign(t, "not JSON (no colon)");
        c->p++;
        if ((r = skip_ws(c)) != R_OK) return r;
        int which = args_out ? event_key(ks + 1, kn - 2) : arg_key(ks + 1, kn - 2);
        if (which < 0) {
            r = skip_value(t, c, depth);
        } else {
            val_t *v = &out[which];
            if (v->form != V_ABSENT) return foreign(t, "a key given twice");
            if (args_out && which == E_ARGS && *c->p == '{') {
                const char *s = c->p;
                cur_t sub = *c;
                r = members(t, &sub, args_out, A_N, depth + 1, NULL);
                *c = sub;
                v->form = V_OBJ; v->s = s; v->n = c->p - s;
            } else {
                r = value(t, c, v, depth);
            }
        }
        if (r != R_OK) return r;
        if ((r = skip_ws(c)) != R_OK) return r;
        if (*c->p == '}') { c->p++; return R_OK; }
        if (*c->p != ',') return foreign(t, "not JSON (no comma)");
        c->p++;
        if ((r = skip_ws(c)) != R_OK) return r;
    }
}

static int members(ks_t *t, cur_t *cp, val_t *out, int nkeys, int depth, val_t *args_out) {
    cur_t c = *cp;
    int r = members_in(t, &c, out, nkeys, depth, args_out);
    *cp = c;
    return r;
}

static int parse_event(ks_t *t, cur_t *c, event_t *ev) {
    for (int i = 0; i < A_N; i++) { ev->a[i].form = V_ABSENT; ev->a[i].time_ok = 0; }
    return members(t, c, ev->e, E_N, 1, ev->a);
}

static int is_str(const val_t *v, const char *s) {
    int64_t n = (int64_t)strlen(s);
    return v->form == V_STR && !v->bs && v->n == n + 2 && memcmp(v->s + 1, s, (size_t)n) == 0;
}

/* an id or count: the integer, NUL64 when absent or null; *ok = 0 for a form Python may read otherwise */
static int64_t id_of(const val_t *v, int *ok, int lenient) {
    if (v->form == V_INT) return v->value;
    if (v->form == V_ABSENT || v->form == V_NULL || v->form == V_BIG) return NUL64;
    if (!lenient) *ok = 0;
    return NUL64;  /* GPU links (_link): anything but an integer is no link */
}

/* a kind of category, looked up once per distinct category text */
static int kind_of(ks_t *t, int32_t cat_id, const val_t *cat) {
    if (cat_id >= t->cat_kind_cap) {
        int64_t cap = (cat_id + 1) * 2;
        int8_t *g = realloc(t->cat_kind, (size_t)cap);
        if (!g) return -1;
        for (int64_t i = t->cat_kind_cap; i < cap; i++) g[i] = -1;
        t->cat_kind = g; t->cat_kind_cap = cap;
    }
    if (t->cat_kind[cat_id] < 0) {
        int kind = K_SKIP;
        const char *p = t->kinds_spec, *end = p + t->kinds_len;
        while (p < end) {  /* lines "category<TAB>kind" */
            const char *tab = memchr(p, '\t', (size_t)(end - p));
            if (!tab) break;
            if (tab - p == cat->n - 2 && memcmp(p, cat->s + 1, (size_t)(cat->n - 2)) == 0) kind = tab[1] - '0';
            const char *nl = memchr(tab, '\n', (size_t)(end - tab));
            p = nl ? nl + 1 : end;
        }
        t->cat_kind[cat_id] = (int8_t)kind;
    }
    return t->cat_kind[cat_id];
}

static int device_code(ks_t *t, int64_t device) {
    table_t *tb = &t->tables[T_DEVICE];
    for (int64_t i = 0; i < tb->n; i++)
        if (I64(tb, 0, i) == device) return (int)i;
    if (tb->n >= MAX_DEVICES) return -2;
    int64_t row = add_row(tb);
    if (row < 0) return -1;
    I64(tb, 0, row) = device;
    return (int)row;
}

static int nomem(ks_t *t) {
    t->status = KS_NOMEM;
    snprintf(t->reason, sizeof t->reason, "no memory");
    return R_FOREIGN;
}

static int memory_event(ks_t *t, const event_t *ev) {
    const val_t *alloc = &ev->a[A_ALLOC], *type = &ev->a[A_DTYPE], *id = &ev->a[A_DID];
    if (alloc->form == V_BIG) return foreign(t, "a huge Total Allocated");
    if (alloc->form != V_INT) return R_OK;  /* the Python reader skips it too */
    int ok = 1;
    int64_t ty = type->form == V_INT ? type->value : (type->form == V_ABSENT || type->form == V_NULL) ? NUL64 : (ok = 0);
    int64_t di = id->form == V_INT ? id->value : (id->form == V_ABSENT || id->form == V_NULL) ? NUL64 : (ok = 0);
    if (!ok) return foreign(t, "a [memory] device not an integer");
    table_t *tb = &t->tables[T_MEMORY];
    for (int64_t i = 0; i < tb->n; i++) {
        if (I64(tb, M_TYPE, i) == ty && I64(tb, M_ID, i) == di) {
            if (alloc->value > I64(tb, M_ALLOC, i)) I64(tb, M_ALLOC, i) = alloc->value;
            return R_OK;
        }
    }
    if (tb->n >= 4096) return foreign(t, "too many memory devices");
    int64_t row = add_row(tb);
    if (row < 0) return nomem(t);
    I64(tb, M_ALLOC, row) = alloc->value; I64(tb, M_TYPE, row) = ty; I64(tb, M_ID, row) = di;
    return R_OK;
}

/* add a whole event to its table */
static int commit(ks_t *t, const event_t *ev) {
    const val_t *ph = &ev->e[E_PH], *cat = &ev->e[E_CAT], *name = &ev->e[E_NAME];
    const val_t *pid = &ev->e[E_PID], *tid = &ev->e[E_TID], *args = &ev->e[E_ARGS];
    /* the types the Python reader's decoder checks, on every event */
    for (int i = E_PH; i <= E_NAME; i++)
        if (ev->e[i].form != V_ABSENT && ev->e[i].form != V_STR && ev->e[i].form != V_NULL)
            return foreign(t, "ph, cat or name not a string");
    for (int i = E_PID; i <= E_TID; i++)
        if (ev->e[i].form != V_ABSENT && ev->e[i].form != V_STR && ev->e[i].form != V_INT)
            return foreign(t, "pid or tid not an integer or a string");
    if (args->form != V_ABSENT && args->form != V_OBJ && args->form != V_NULL) return foreign(t, "args not an object");
    for (int i = A_DEVICE; i <= A_STREAM; i++)
        if (ev->a[i].form != V_ABSENT && ev->a[i].form != V_STR && ev->a[i].form != V_INT &&
            ev->a[i].form != V_NULL)
            return foreign(t, "device or stream not an integer or a string");
    if (ph->form == V_STR && ph->bs) return foreign(t, "an escape in ph");
    if (!is_str(ph, "X")) {
        if (is_str(ph, "i") || is_str(ph, "I")) {
            if (name->form == V_STR && name->bs) return foreign(t, "an escape in an instant event's name");
            if (is_str(name, "[memory]") && args->form == V_OBJ) return memory_event(t, ev);
        }
        return R_OK;
    }
    if (cat->form != V_STR) return R_OK;
    if (cat->bs) return foreign(t, "an escape in a category");
    int32_t cat_id = t->last_cat;  /* most events repeat the category before them */
    if (cat_id < 0 || t->sets[S_CAT].items[cat_id].len != cat->n ||
        memcmp(t->sets[S_CAT].items[cat_id].ptr, cat->s, (size_t)cat->n) != 0) {
        cat_id = intern(t, S_CAT, cat->s, cat->n);
        if (cat_id < 0) return nomem(t);
        t->last_cat = cat_id;
    }
    int kind = kind_of(t, cat_id, cat);
    if (kind < 0) return nomem(t);
    if (kind == K_SKIP) return R_OK;
    if (name->form != V_STR) return foreign(t, "an event without a name");
    const val_t *ts = &ev->e[E_TS], *dur = &ev->e[E_DUR];
    if (!ts->time_ok || !dur->time_ok) return foreign(t, "ts or dur not in Kineto's form");
    if (ts->ns > INT64_MAX - dur->ns) return foreign(t, "an end past 2^63 ns");
    int64_t start = ts->ns, end = ts->ns + dur->ns;
    const val_t *a = ev->a;
    int ok = 1;
    if (kind == K_KERNEL || kind == K_COPY) {
        const val_t *dv = a[A_DEVICE].form == V_ABSENT || a[A_DEVICE].form == V_NULL ? pid : &a[A_DEVICE];
        if (dv->form == V_STR) return foreign(t, "a device given as text");
        int code = device_code(t, dv->form == V_INT ? dv->value : NUL64);
        if (code == -2) return foreign(t, "too many devices");
        if (code < 0) return nomem(t);
        const val_t *sv = a[A_STREAM].form == V_ABSENT || a[A_STREAM].form == V_NULL ? tid : &a[A_STREAM];
        int32_t nid = intern(t, S_GPU, name->s, name->n);
        table_t *tb = &t->tables[kind == K_KERNEL ? T_KERNEL : T_COPY];
        int64_t row = add_row(tb);
        if (nid < 0 || row < 0) return nomem(t);
        I32(tb, G_NAME, row) = nid; I32(tb, G_DEVICE, row) = code;
        I64(tb, G_START, row) = start; I64(tb, G_END, row) = end;
        I64(tb, G_STREAM, row) = sv->form == V_INT ? sv->value : NUL64;
        I64(tb, G_CORR, row) = id_of(&a[A_CORR], &ok, 1);
        I64(tb, G_EXT, row) = id_of(&a[A_EXT], &ok, 1);
        return R_OK;
    }
    int64_t p = pid->form == V_INT ? pid->value : NUL64, th = tid->form == V_INT ? tid->value : NUL64;
    int32_t nid = intern(t, S_HOST, name->s, name->n);
    if (nid < 0) return nomem(t);
    if (kind == K_RUNTIME) {
        table_t *tb = &t->tables[T_RUNTIME];
        int64_t corr = id_of(&a[A_CORR], &ok, 0), ext = id_of(&a[A_EXT], &ok, 0);
        if (!ok) return foreign(t, "an id not an integer");
        int64_t row = add_row(tb);
        if (row < 0) return nomem(t);
        I32(tb, R_NAME, row) = nid; I32(tb, R_CAT, row) = cat_id;
        I64(tb, R_PID, row) = p; I64(tb, R_TID, row) = th; I64(tb, R_START, row) = start; I64(tb, R_END, row) = end;
        I64(tb, R_CORR, row) = corr; I64(tb, R_EXT, row) = ext;
        return R_OK;
    }
    table_t *tb = &t->tables[T_HOST];
    int64_t ext = id_of(&a[A_EXT], &ok, 0);
    if (!ok) return foreign(t, "an id not an integer");
    int32_t shapes[4];
    for (int i = 0; i < 4; i++) {
        const val_t *sv = &a[A_DIMS + i];
        shapes[i] = sv->form == V_ABSENT ? -1 : intern(t, S_SHAPE, sv->s, sv->n);
        if (sv->form != V_ABSENT && shapes[i] < 0) return nomem(t);
    }
    int comm = is_str(name, "record_param_comms") || (name->n > 6 && memcmp(name->s, "\"nccl:", 6) == 0);
    int32_t args_id = -1;
    if (comm && args->form == V_OBJ && (args_id = intern(t, S_COMM, args->s, args->n)) < 0) return nomem(t);
    int64_t row = add_row(tb);
    if (row < 0) return nomem(t);
    I32(tb, H_NAME, row) = nid; I32(tb, H_CAT, row) = cat_id;
    I64(tb, H_PID, row) = p; I64(tb, H_TID, row) = th; I64(tb, H_START, row) = start; I64(tb, H_END, row) = end;
    I64(tb, H_EXT, row) = ext;
    for (int i = 0; i < 4; i++) I32(tb, H_DIMS + i, row) = shapes[i];
    if (comm) {
        table_t *ct = &t->tables[T_COMM];
        int64_t crow = add_row(ct);
        if (crow < 0) return nomem(t);
        I64(ct, C_ROW, crow) = row; I32(ct, C_ARGS, crow) = args_id;
    }
    return R_OK;
}

/* The events in buf[0:n]: how many bytes were consumed (whole events); the status says foreign or done. */
static int64_t scan(ks_t *t, const char *buf, int64_t n) {
    int64_t done = 0;
    cur_t c = {buf, buf + n, 0, 0, 0, 0};
    for (;;) {
        c.p = buf + done;
        if (skip_ws(&c) != R_OK) return done;
        if (*c.p == ']') {
            c.p++;
            t->tail = malloc((size_t)(c.end - c.p) + 1);
            if (!t->tail) { nomem(t); return done; }
            memcpy(t->tail, c.p, (size_t)(c.end - c.p));
            t->tail_len = c.end - c.p;
            t->status = KS_DONE;
            return n;
        }
        if (t->state == 1) {
            if (*c.p != ',') { foreign(t, "not JSON between events"); return done; }
            c.p++;
            if (skip_ws(&c) != R_OK) return done;
        }
        if (*c.p != '{') { foreign(t, "an event not an object"); return done; }
        event_t ev;
        int r = parse_event(t, &c, &ev);
        if (r == R_MORE) return done;
        if (r != R_OK || commit(t, &ev) != R_OK) return done;
        t->state = 1;
        t->offset += c.p - (buf + done);
        done = c.p - buf;
    }
}

/* ------------------------------------------------------------------ the API */
ks_t *ks_new(const char *kinds, int64_t len) {
    static int ready = 0;
    if (!ready) { init_class(); ready = 1; }
    ks_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->kinds_spec = malloc((size_t)len + 1);
    if (!t->kinds_spec) { free(t); return NULL; }
    memcpy(t->kinds_spec, kinds, (size_t)len);
    t->kinds_len = len;
    t->last_cat = -1;
    for (int i = 0; i < T_N; i++) {
        t->tables[i].ncols = NCOLS[i];
        for (int j = 0; j < NCOLS[i]; j++) t->tables[i].cols[j].size = COL_SIZES[i][j];
    }
    return t;
}

#define MAX_EVENT (64 << 20) /* an event this long is read again and again as blocks come: Python's reader reads it */

static int carry_keep(ks_t *t, const char *p, int64_t n) {
    if (n > MAX_EVENT) { foreign(t, "an event over 64 MiB"); return -1; }
    if (n > t->carry_cap) {
        char *g = malloc((size_t)n);
        if (!g) { nomem(t); return -1; }
        free(t->carry); t->carry = g; t->carry_cap = n;
    }
    memmove(t->carry, p, (size_t)n);
    t->carry_len = n;
    return 0;
}

/* The next decompressed bytes of the list (the first call: those right after its `[`). KS_MORE: give more. */
int ks_feed(ks_t *t, const char *data, int64_t n) {
    if (t->status != KS_MORE) return t->status;
    int64_t off = 0;
    if (t->carry_len) {  /* complete the event cut by the last block: with the start of this one, then all of it */
        int64_t take = n < (1 << 16) ? n : (1 << 16);
        for (;;) {
            int64_t joined = t->carry_len + take;
            char *buf = malloc((size_t)joined);
            if (!buf) return nomem(t), t->status;
            memcpy(buf, t->carry, (size_t)t->carry_len);
            memcpy(buf + t->carry_len, data, (size_t)take);
            int64_t used = scan(t, buf, joined);
            if (t->status == KS_DONE && take < n) {  /* the keys after the list: the rest of this block too */
                char *g = realloc(t->tail, (size_t)(t->tail_len + n - take) + 1);
                if (!g) { free(buf); return nomem(t), t->status; }
                memcpy(g + t->tail_len, data + take, (size_t)(n - take));
                t->tail = g; t->tail_len += n - take;
            }
            if (t->status != KS_MORE) { free(buf); return t->status; }
            if (used >= t->carry_len) { off = used - t->carry_len; t->carry_len = 0; free(buf); break; }
            if (take == n) { int k = carry_keep(t, buf + used, joined - used); free(buf); return k ? t->status : KS_MORE; }
            free(buf);
            take = take * 16 < n ? take * 16 : n;
        }
    }
    int64_t used = scan(t, data + off, n - off);
    if (t->status != KS_MORE) return t->status;
    if (carry_keep(t, data + off + used, n - off - used)) return t->status;
    return KS_MORE;
}

/* The end of the file: the list must have ended. */
int ks_finish(ks_t *t) {
    if (t->status == KS_MORE) {
        t->status = KS_FOREIGN;
        snprintf(t->reason, sizeof t->reason, "the file ends inside the traceEvents list");
    }
    return t->status;
}

const char *ks_reason(ks_t *t) { return t->reason; }
const char *ks_tail(ks_t *t, int64_t *n) { *n = t->tail_len; return t->tail; }
int64_t ks_count(ks_t *t, int table) { return t->tables[table].n; }
void *ks_column(ks_t *t, int table, int col) { return t->tables[table].cols[col].data; }

/* A column handed to Python (which frees it with ks_release once no frame uses it), cut to its length. */
void *ks_take(ks_t *t, int table, int col) {
    table_t *tb = &t->tables[table];
    void *data = tb->cols[col].data;
    tb->cols[col].data = NULL;
    if (data && tb->n) {
        void *cut = realloc(data, (size_t)tb->n * (size_t)tb->cols[col].size);
        if (cut) data = cut;
    }
    return data;
}

/* The Arrow C data interface (arrow.apache.org/docs/format/CDataInterface.html): polars takes a column so, without
   a copy, and frees it through release_array once no frame uses it. */
struct ArrowSchema {
    const char *format, *name, *metadata;
    int64_t flags, n_children;
    struct ArrowSchema **children, *dictionary;
    void (*release)(struct ArrowSchema *);
    void *private_data;
};
struct ArrowArray {
    int64_t length, null_count, offset, n_buffers, n_children;
    const void **buffers;
    struct ArrowArray **children, *dictionary;
    void (*release)(struct ArrowArray *);
    void *private_data;
};

static void release_schema(struct ArrowSchema *schema) { schema->release = NULL; }

static void release_array(struct ArrowArray *array) {
    free((void *)array->buffers[0]);
    free((void *)array->buffers[1]);
    free(array->buffers);
    array->release = NULL;
}

/* A column as an Arrow array, taken from the scanner: int64 (NUL64 is null) or int32 (a negative code is null).
   0, or -1 on no memory (the column is then freed). */
int ks_export(ks_t *t, int table, int col, struct ArrowSchema *schema, struct ArrowArray *array) {
    table_t *tb = &t->tables[table];
    int64_t n = tb->n;
    int wide = tb->cols[col].size == 8;
    void *data = ks_take(t, table, col);
    if (!data) data = malloc(8);
    const void **buffers = malloc(2 * sizeof *buffers);
    if (!data || !buffers) { free(data); free(buffers); return -1; }
    int64_t nulls = 0;
    for (int64_t i = 0; i < n; i++) nulls += wide ? ((int64_t *)data)[i] == NUL64 : ((int32_t *)data)[i] < 0;
    uint8_t *valid = NULL;
    if (nulls) {
        valid = calloc((size_t)(n + 7) / 8, 1);
        if (!valid) { free(data); free(buffers); return -1; }
        for (int64_t i = 0; i < n; i++)
            if (wide ? ((int64_t *)data)[i] != NUL64 : ((int32_t *)data)[i] >= 0) valid[i >> 3] |= (uint8_t)(1u << (i & 7));
    }
    buffers[0] = valid;
    buffers[1] = data;
    *schema = (struct ArrowSchema){wide ? "l" : "i", "", NULL, 2 /* nullable */, 0, NULL, NULL, release_schema, NULL};
    *array = (struct ArrowArray){n, nulls, 0, 2, 0, buffers, NULL, NULL, release_array, NULL};
    return 0;
}

/* A GPU column widened to int64 into `out` (the Python reader's array.array columns), then freed. */
void ks_copy_i64(ks_t *t, int table, int col, int64_t *out) {
    table_t *tb = &t->tables[table];
    void *data = ks_take(t, table, col);
    if (!data) return;
    for (int64_t i = 0; i < tb->n; i++)
        out[i] = tb->cols[col].size == 8 ? ((int64_t *)data)[i] : ((int32_t *)data)[i];
    free(data);
}

/* Release an exported array Python did not hand to polars. */
void ks_release_array(struct ArrowArray *array) {
    if (array->release) array->release(array);
}

int64_t ks_strings(ks_t *t, int set) { return t->sets[set].count; }

const char *ks_string(ks_t *t, int set, int64_t i, int64_t *n) {
    *n = t->sets[set].items[i].len;
    return t->sets[set].items[i].ptr;
}

void ks_free(ks_t *t) {
    if (!t) return;
    for (int i = 0; i < T_N; i++)
        for (int j = 0; j < t->tables[i].ncols; j++) free(t->tables[i].cols[j].data);
    for (int i = 0; i < S_N; i++) { free(t->sets[i].items); free(t->sets[i].slots); }
    for (arena_block *b = t->arena; b;) { arena_block *next = b->next; free(b); b = next; }
    free(t->cat_kind); free(t->kinds_spec); free(t->carry); free(t->tail);
    free(t);
}
