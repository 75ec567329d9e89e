/* Kineto-layout Chrome trace (torch.profiler's JSON export) -> rocprofv3 CSV rows, for tracer/native_rows.py.

Two phases, so that the per-name work (JSON unescaping, -T truncation, CSV quoting) stays in Python over the few
hundred unique names while the per-event work runs here:
  kr_scan      maps the file and reads every event of the categories the tracer reports, strictly in the layout
               Kineto writes (and that convert._fast_chunk reads); anything else and the status says "not my
               layout" (KR_FOREIGN): Python's reader then handles the whole file, so both give the same files.
  kr_write_*   sorts one table by start (stable), writes it as CSV through whole-line write(2) calls at its final
               name (LineWriter's semantics: on a failed write the file is cut back to its last whole line, or
               removed when not even the header made it, and the errno is returned; a negative
               errno: the file could not be created), and hands back the durations
               grouped by name for the stats Python computes.
Times are exact integer nanoseconds from the decimal microseconds text (half a nanosecond rounds to even). Plain C11
and POSIX only.
*/
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define KR_OK 0
#define KR_FOREIGN 1
#define KR_NOMEM 2

enum { T_OPS = 0, T_API = 1, T_COPY = 2 };
enum { C_CPU_OP, C_KERNEL, C_RUNTIME, C_DRIVER, C_HIP, C_MEMCPY, C_OTHER };

typedef struct { int64_t start, dur, tid, corr; int32_t name, pad; } op_t;
typedef struct { int64_t device, stream, regs, shared, block[3], grid[3]; } gpu_t;
typedef struct { int64_t start, dur, pid, tid, corr; int32_t name, cat; } api_t;
typedef struct { int64_t start, dur, device, stream, corr; int32_t name, pad; } copy_t;

typedef struct {
    const char *ptr; int64_t len; uint64_t hash;
} name_t;

typedef struct {  /* raw JSON string text (quotes included) -> id, in first-seen order */
    name_t *names; int64_t count, cap;
    int32_t *slots; int64_t nslots;
} names_t;

typedef struct {
    int64_t *keys, *vals; uint8_t *used; int64_t cap, count;
} corr_map_t;

typedef struct {
    int status;
    char reason[160];
    int cpu;
    const char *map; size_t size;
    int64_t base;
    op_t *ops; gpu_t *gpu; int64_t nops, capops;
    api_t *api; int64_t napi, capapi;
    copy_t *copies; int64_t ncopies, capcopies;
    names_t names[3];
    corr_map_t launcher;
} kr_trace;

static int foreign(kr_trace *t, const char *why, const char *at) {
    t->status = KR_FOREIGN;
    if (at) snprintf(t->reason, sizeof t->reason, "%s at byte %lld", why, (long long)(at - t->map));
    else snprintf(t->reason, sizeof t->reason, "%s", why);
    return 0;
}

/* ------------------------------------------------------------------ small containers */
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

static int names_grow(names_t *s) {
    int64_t nslots = s->nslots ? s->nslots * 2 : 1024;
    int32_t *slots = malloc((size_t)nslots * sizeof *slots);
    if (!slots) return -1;
    for (int64_t i = 0; i < nslots; i++) slots[i] = -1;
    for (int64_t i = 0; i < s->count; i++) {
        int64_t j = (int64_t)(s->names[i].hash & (uint64_t)(nslots - 1));
        while (slots[j] >= 0) j = (j + 1) & (nslots - 1);
        slots[j] = (int32_t)i;
    }
    free(s->slots); s->slots = slots; s->nslots = nslots;
    return 0;
}

/* id of the raw name text, added when new; -1 on no memory */
static int32_t names_id(names_t *s, const char *p, int64_t n) {
    if (s->count * 2 >= s->nslots && names_grow(s)) return -1;
    uint64_t h = hash_bytes(p, n);
    int64_t j = (int64_t)(h & (uint64_t)(s->nslots - 1));
    while (s->slots[j] >= 0) {
        name_t *e = &s->names[s->slots[j]];
        if (e->hash == h && e->len == n && memcmp(e->ptr, p, (size_t)n) == 0) return s->slots[j];
        j = (j + 1) & (s->nslots - 1);
    }
    if (s->count == s->cap) {
        int64_t cap = s->cap ? s->cap * 2 : 256;
        name_t *grown = realloc(s->names, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        s->names = grown; s->cap = cap;
    }
    s->names[s->count] = (name_t){p, n, h};
    s->slots[j] = (int32_t)s->count;
    return (int32_t)s->count++;
}

static int corr_put(corr_map_t *m, int64_t key, int64_t val) {
    if (m->count * 2 >= m->cap) {
        int64_t cap = m->cap ? m->cap * 2 : 4096;
        int64_t *keys = malloc((size_t)cap * 8), *vals = malloc((size_t)cap * 8);
        uint8_t *used = calloc((size_t)cap, 1);
        if (!keys || !vals || !used) { free(keys); free(vals); free(used); return -1; }
        for (int64_t i = 0; i < m->cap; i++) {
            if (!m->used[i]) continue;
            int64_t j = (int64_t)(((uint64_t)m->keys[i] * 0x9E3779B97F4A7C15ULL) >> 20) & (cap - 1);
            while (used[j]) j = (j + 1) & (cap - 1);
            used[j] = 1; keys[j] = m->keys[i]; vals[j] = m->vals[i];
        }
        free(m->keys); free(m->vals); free(m->used);
        m->keys = keys; m->vals = vals; m->used = used; m->cap = cap;
    }
    int64_t j = (int64_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> 20) & (m->cap - 1);
    while (m->used[j]) {
        if (m->keys[j] == key) { m->vals[j] = val; return 0; }  /* the last call with this id wins, as a dict */
        j = (j + 1) & (m->cap - 1);
    }
    m->used[j] = 1; m->keys[j] = key; m->vals[j] = val; m->count++;
    return 0;
}

static int64_t corr_get(const corr_map_t *m, int64_t key) {
    if (!m->cap) return 0;
    int64_t j = (int64_t)(((uint64_t)key * 0x9E3779B97F4A7C15ULL) >> 20) & (m->cap - 1);
    while (m->used[j]) {
        if (m->keys[j] == key) return m->vals[j];
        j = (j + 1) & (m->cap - 1);
    }
    return 0;
}

#define GROW(arr, n, cap, extra)                                                          \
    do {                                                                                   \
        if ((n) == (cap)) {                                                                \
            int64_t c2 = (cap) ? (cap) * 2 : 65536;                                       \
            void *g = realloc((arr), (size_t)c2 * sizeof *(arr));                          \
            if (!g) return KR_NOMEM;                                                       \
            (arr) = g;                                                                     \
            extra;                                                                         \
            (cap) = c2;                                                                    \
        }                                                                                  \
    } while (0)

/* ------------------------------------------------------------------ lexing, as the Python reader's patterns */
static inline int is_ws(char c) {  /* \s of Python's bytes patterns */
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

typedef struct { const char *p, *end; } cur_t;

static inline void skip_ws(cur_t *c) { while (c->p < c->end && is_ws(*c->p)) c->p++; }

static inline int lit(cur_t *c, const char *s, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, s, n) != 0) return 0;
    c->p += n;
    return 1;
}
#define LIT(c, s) lit((c), (s), sizeof(s) - 1)

/* A JSON string as `"[^"\\]*(?:\\.[^"\\]*)*"` matches it (`.`: any byte but a newline). *bs: it holds a backslash. */
static int string_tok(cur_t *c, const char **start, int64_t *len, int *bs) {
    if (c->p >= c->end || *c->p != '"') return 0;
    const char *s = c->p, *q = s + 1;
    *bs = 0;
    for (;;) {
        const char *quote = memchr(q, '"', (size_t)(c->end - q));
        if (!quote) return 0;
        const char *slash = memchr(q, '\\', (size_t)(quote - q));
        if (!slash) { q = quote + 1; break; }
        *bs = 1;
        if (slash + 1 >= c->end || slash[1] == '\n') return 0;
        q = slash + 2;
    }
    *start = s; *len = q - s; c->p = q;
    return 1;
}

static int int_tok(cur_t *c, int64_t *out, int allow_minus) {
    const char *p = c->p;
    int neg = 0;
    if (allow_minus && p < c->end && *p == '-') { neg = 1; p++; }
    if (p >= c->end || *p < '0' || *p > '9') return 0;
    uint64_t v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        if (v > (UINT64_MAX - 9) / 10) return 0;
        v = v * 10 + (uint64_t)(*p - '0');
        p++;
    }
    if (neg ? v > (uint64_t)INT64_MAX + 1 : v > (uint64_t)INT64_MAX) return 0;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    c->p = p;
    return 1;
}

/* Kineto's microseconds `\d+(?:\.\d+)?` -> exact nanoseconds; 0 when it is not sure (too long, too large). */
static int us_tok(cur_t *c, int64_t *ns) {
    const char *p = c->p, *digits = p;
    while (p < c->end && *p >= '0' && *p <= '9') p++;
    if (p == digits || p - digits > 30) return 0;
    __int128 v = 0;
    for (const char *d = digits; d < p; d++) v = v * 10 + (*d - '0');
    int frac[3] = {0, 0, 0};
    int round_up = 0;
    if (p < c->end && *p == '.') {
        const char *f = ++p;
        while (p < c->end && *p >= '0' && *p <= '9') p++;
        if (p == f || p - f > 30) return 0;
        int nf = (int)(p - f);
        for (int i = 0; i < 3 && i < nf; i++) frac[i] = f[i] - '0';
        if (nf > 3) {  /* finer than a nanosecond: half to even, as Decimal does */
            int d4 = f[3] - '0', rest = 0;
            for (const char *r = f + 4; r < p; r++) rest |= (*r != '0');
            round_up = d4 > 5 || (d4 == 5 && (rest || (frac[2] & 1)));
        }
    }
    v = v * 1000 + frac[0] * 100 + frac[1] * 10 + frac[2] + round_up;
    if (v > INT64_MAX) return 0;
    *ns = (int64_t)v;
    c->p = p;
    return 1;
}

static int category(const char *s, int64_t n) {
    static const char *const cats[] = {"cpu_op", "kernel", "cuda_runtime", "cuda_driver", "hip_runtime",
                                       "gpu_memcpy"};
    for (int i = 0; i < 6; i++)
        if ((int64_t)strlen(cats[i]) == n && memcmp(cats[i], s, (size_t)n) == 0) return i;
    return C_OTHER;
}

/* args keys the rows need; found as `"key":` (Python's args.find) */
enum { A_EXTERNAL, A_CORR, A_STREAM, A_DEVICE, A_REGS, A_SHARED, A_BLOCK, A_GRID, A_N };
static const char *const ARG_KEYS[A_N] = {"\"External id\"", "\"correlation\"", "\"stream\"", "\"device\"",
                                          "\"registers per thread\"", "\"shared memory\"", "\"block\"", "\"grid\""};

typedef struct { const char *at[A_N]; const char *stop[A_N]; } args_t;

/* A bare value: a number, true, false or null (no quotes, brackets or braces). */
static inline int bare_char(char c) {
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' || c == '+' ||
           c == '-';
}

/* A flat args object (after its `{`): `"key": value` pairs; values are strings, bare tokens or arrays of them
   (nested arrays allowed); no object inside, no key with a backslash, no key twice among those read. */
static int args_obj(cur_t *c, args_t *a) {
    memset(a, 0, sizeof *a);
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') { c->p++; return 1; }
    for (;;) {
        const char *ks; int64_t kn; int bs;
        if (!string_tok(c, &ks, &kn, &bs) || bs) return 0;
        if (c->p >= c->end || *c->p != ':') return 0;
        c->p++;
        int which = -1;
        for (int i = 0; i < A_N; i++)
            if ((int64_t)strlen(ARG_KEYS[i]) == kn && memcmp(ARG_KEYS[i], ks, (size_t)kn) == 0) which = i;
        if (which >= 0) {
            if (a->at[which]) return 0;
            a->at[which] = c->p;
        }
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == '"') {
            const char *s; int64_t n;
            if (!string_tok(c, &s, &n, &bs)) return 0;
        } else if (*c->p == '[') {
            int depth = 0;
            while (c->p < c->end) {
                char ch = *c->p;
                if (ch == '"') {
                    const char *s; int64_t n;
                    if (!string_tok(c, &s, &n, &bs)) return 0;
                    continue;
                }
                if (ch == '[') depth++;
                else if (ch == ']') { if (--depth == 0) { c->p++; break; } }
                else if (!(bare_char(ch) || is_ws(ch) || ch == ',')) return 0;
                c->p++;
            }
            if (depth) return 0;
        } else {
            const char *v = c->p;
            while (c->p < c->end && bare_char(*c->p)) c->p++;
            if (c->p == v) return 0;
        }
        if (which >= 0) a->stop[which] = c->p;
        skip_ws(c);
        if (c->p >= c->end) return 0;
        if (*c->p == '}') { c->p++; return 1; }
        if (*c->p != ',') return 0;
        c->p++;
        skip_ws(c);
    }
}

/* The integer value of a read key: `-?\d+` exactly; absent -> dflt. 0: not such a value. */
static int arg_int(const args_t *a, int key, int64_t dflt, int64_t *out) {
    if (!a->at[key]) { *out = dflt; return 1; }
    cur_t c = {a->at[key], a->stop[key]};
    skip_ws(&c);
    return int_tok(&c, out, 1) && c.p == c.end;
}

/* `[x, y, z]` of integers; absent -> 0, 0, 0. */
static int arg_xyz(const args_t *a, int key, int64_t xyz[3]) {
    if (!a->at[key]) { xyz[0] = xyz[1] = xyz[2] = 0; return 1; }
    cur_t c = {a->at[key], a->stop[key]};
    skip_ws(&c);
    if (!LIT(&c, "[")) return 0;
    for (int i = 0; i < 3; i++) {
        skip_ws(&c);
        if (!int_tok(&c, &xyz[i], 1)) return 0;
        skip_ws(&c);
        if (!lit(&c, i < 2 ? "," : "]", 1)) return 0;
    }
    return c.p == c.end;
}

/* One event of a read category, from the closing quote of its category on; c->p ends after its `}`. 1: read, 0: not
   Kineto's layout, -1: no memory. */
static int read_event(kr_trace *t, cur_t *c, int cat) {
    const char *nm; int64_t nn; int bs;
    int64_t pid, tid, ts, dur;
    if (!LIT(c, "\",")) return 0;
    skip_ws(c);
    if (!LIT(c, "\"name\": ") || !string_tok(c, &nm, &nn, &bs) || !LIT(c, ",")) return 0;
    skip_ws(c);
    if (!LIT(c, "\"pid\": ") || !int_tok(c, &pid, 1) || !LIT(c, ",")) return 0;
    skip_ws(c);
    if (!LIT(c, "\"tid\": ") || !int_tok(c, &tid, 1) || !LIT(c, ",")) return 0;
    skip_ws(c);
    if (!LIT(c, "\"ts\": ") || !us_tok(c, &ts) || !LIT(c, ",")) return 0;
    skip_ws(c);
    if (!LIT(c, "\"dur\": ") || !us_tok(c, &dur)) return 0;
    skip_ws(c);
    args_t a;
    memset(&a, 0, sizeof a);
    if (c->p < c->end && *c->p == ',') {
        c->p++;
        skip_ws(c);
        if (!LIT(c, "\"args\": {") || !args_obj(c, &a)) return 0;
        skip_ws(c);
    }
    if (!LIT(c, "}")) return 0;
    int64_t start, end;  /* every time must stay in range with the base added */
    if (__builtin_add_overflow(ts, t->base, &start) || __builtin_add_overflow(start, dur, &end)) return 0;
    int wanted = t->cpu ? cat == C_CPU_OP : cat != C_CPU_OP;
    if (!wanted) return 1;
    if (cat == C_CPU_OP || cat == C_KERNEL) {
        op_t op = {ts, dur, tid, 0, 0, 0};
        gpu_t g;
        if (cat == C_CPU_OP) {
            if (!arg_int(&a, A_EXTERNAL, 0, &op.corr)) return 0;
        } else {
            if (!arg_int(&a, A_CORR, 0, &op.corr) || !arg_int(&a, A_DEVICE, 0, &g.device) ||
                !arg_int(&a, A_STREAM, tid, &g.stream) || !arg_int(&a, A_REGS, 0, &g.regs) ||
                !arg_int(&a, A_SHARED, 0, &g.shared) || !arg_xyz(&a, A_BLOCK, g.block) ||
                !arg_xyz(&a, A_GRID, g.grid))
                return 0;
            int64_t prod;
            for (int i = 0; i < 3; i++)
                if (__builtin_mul_overflow(g.grid[i], g.block[i], &prod)) return 0;
            op.tid = 0;
        }
        int32_t id = names_id(&t->names[T_OPS], nm, nn);
        if (id < 0) return -1;
        op.name = id;
        if (t->nops == t->capops) {
            int64_t cap = t->capops ? t->capops * 2 : 65536;
            op_t *o = realloc(t->ops, (size_t)cap * sizeof *o);
            if (!o) return -1;
            t->ops = o;
            if (!t->cpu) {
                gpu_t *gg = realloc(t->gpu, (size_t)cap * sizeof *gg);
                if (!gg) return -1;
                t->gpu = gg;
            }
            t->capops = cap;
        }
        if (!t->cpu) t->gpu[t->nops] = g;
        t->ops[t->nops++] = op;
        return 1;
    }
    if (cat == C_MEMCPY) {
        copy_t cp = {ts, dur, 0, 0, 0, 0, 0};
        if (!arg_int(&a, A_DEVICE, 0, &cp.device) || !arg_int(&a, A_STREAM, 0, &cp.stream) ||
            !arg_int(&a, A_CORR, 0, &cp.corr))
            return 0;
        int32_t id = names_id(&t->names[T_COPY], nm, nn);
        if (id < 0) return -1;
        cp.name = id;
        if (t->ncopies == t->capcopies) {
            int64_t cap = t->capcopies ? t->capcopies * 2 : 1024;
            copy_t *g = realloc(t->copies, (size_t)cap * sizeof *g);
            if (!g) return -1;
            t->copies = g; t->capcopies = cap;
        }
        t->copies[t->ncopies++] = cp;
        return 1;
    }
    api_t ap = {ts, dur, pid, tid, 0, 0, cat};
    if (!arg_int(&a, A_CORR, 0, &ap.corr)) return 0;
    if (ap.corr && corr_put(&t->launcher, ap.corr, tid)) return -1;
    int32_t id = names_id(&t->names[T_API], nm, nn);
    if (id < 0) return -1;
    ap.name = id;
    if (t->napi == t->capapi) {
        int64_t cap = t->capapi ? t->capapi * 2 : 65536;
        api_t *g = realloc(t->api, (size_t)cap * sizeof *g);
        if (!g) return -1;
        t->api = g; t->capapi = cap;
    }
    t->api[t->napi++] = ap;
    return 1;
}

/* `"baseTimeNanoseconds"\s*:\s*(\d+)`, the first match starting in [lo, hi) (ending by `limit`). */
static int find_base(kr_trace *t, const char *lo, const char *hi, const char *limit, int64_t *out) {
    static const char key[] = "\"baseTimeNanoseconds\"";
    const char *p = lo;
    while (p < hi) {
        const char *k = memmem(p, (size_t)(hi - p), key, sizeof key - 1);
        if (!k) return 0;
        cur_t c = {k + sizeof key - 1, limit};
        skip_ws(&c);
        if (LIT(&c, ":")) {
            skip_ws(&c);
            if (c.p < c.end && *c.p >= '0' && *c.p <= '9') {
                if (!int_tok(&c, out, 0)) return foreign(t, "baseTimeNanoseconds out of range", k), -1;
                return 1;
            }
        }
        p = k + 1;
    }
    return 0;
}

static int scan(kr_trace *t) {
    const char *map = t->map, *end = map + t->size;
    const char *head = memmem(map, t->size, "\"traceEvents\"", 13);
    if (!head) return foreign(t, "no \"traceEvents\" key", NULL);
    int found = find_base(t, map, head, head, &t->base);
    if (found < 0) return 0;
    if (!found && find_base(t, head, end, end, &t->base) < 0) return 0;
    const char *from = head, *done = head;  /* done: the end of the text the last event's reading covered */
    for (;;) {
        const char *ph = memmem(from, (size_t)(end - from), "\"ph\"", 4);
        if (!ph) break;
        if (ph < done) return foreign(t, "\"ph\" inside an event", ph);
        cur_t c = {ph, end};
        if (!LIT(&c, "\"ph\": \"") || c.p >= end) return foreign(t, "an event not in Kineto's layout", ph);
        char k = *c.p;
        if (k == '"') return foreign(t, "an empty phase", ph);
        if (k != 'X') {  /* another phase: not read */
            done = c.p + 1;
            from = ph + 4;
            continue;
        }
        c.p++;
        cur_t probe = c;
        if (!LIT(&probe, "\",")) return foreign(t, "an event not in Kineto's layout", ph);
        skip_ws(&probe);
        if (!LIT(&probe, "\"cat\": \"")) return foreign(t, "an X event without its category first", ph);
        const char *cs = probe.p;
        while (probe.p < end && *probe.p != '"' && *probe.p != '\\') probe.p++;
        if (probe.p >= end) return foreign(t, "a cut category", ph);
        int cat = *probe.p == '\\' ? C_OTHER : category(cs, probe.p - cs);
        if (cat == C_OTHER) {  /* a category nobody reads: the rest of the event is not looked at */
            done = cs;
            from = ph + 4;
            continue;
        }
        int ok = read_event(t, &probe, cat);  /* from the category's closing quote */
        if (ok < 0) { t->status = KR_NOMEM; return 0; }
        if (!ok) return foreign(t, "an event not in Kineto's layout", ph);
        done = probe.p;
        from = ph + 4;
    }
    t->status = KR_OK;
    return 1;
}

kr_trace *kr_scan(const char *path, int cpu) {
    kr_trace *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->cpu = cpu;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) { foreign(t, "cannot open the file", NULL); return t; }
    struct stat st;
    if (fstat(fd, &st) || st.st_size <= 0) { close(fd); foreign(t, "empty or unreadable file", NULL); return t; }
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED) { foreign(t, "cannot map the file", NULL); return t; }
    madvise(m, (size_t)st.st_size, MADV_SEQUENTIAL);
    t->map = m; t->size = (size_t)st.st_size;
    scan(t);
    return t;
}

int kr_status(const kr_trace *t) { return t->status; }
const char *kr_reason(const kr_trace *t) { return t->reason; }
int64_t kr_base(const kr_trace *t) { return t->base; }

int64_t kr_count(const kr_trace *t, int table) {
    return table == T_OPS ? t->nops : table == T_API ? t->napi : t->ncopies;
}

int64_t kr_names(const kr_trace *t, int table) { return t->names[table].count; }

/* The raw JSON text of name i (quotes included); it lives in the mapped file. */
const char *kr_name(const kr_trace *t, int table, int64_t i, int64_t *len) {
    *len = t->names[table].names[i].len;
    return t->names[table].names[i].ptr;
}

/* ------------------------------------------------------------------ sorting: stable, by start */
typedef struct { int64_t key; int64_t idx; } kv_t;

static void merge_sort(kv_t *a, kv_t *tmp, int64_t n) {
    if (n < 2) return;
    if (n <= 16) {  /* insertion sort: stable */
        for (int64_t i = 1; i < n; i++) {
            kv_t x = a[i]; int64_t j = i;
            while (j > 0 && a[j - 1].key > x.key) { a[j] = a[j - 1]; j--; }
            a[j] = x;
        }
        return;
    }
    int64_t mid = n / 2;
    merge_sort(a, tmp, mid);
    merge_sort(a + mid, tmp, n - mid);
    if (a[mid - 1].key <= a[mid].key) return;  /* in order already */
    memcpy(tmp, a, (size_t)mid * sizeof *a);
    int64_t i = 0, j = mid, k = 0;
    while (i < mid && j < n) a[k++] = (a[j].key < tmp[i].key) ? a[j++] : tmp[i++];
    while (i < mid) a[k++] = tmp[i++];
}

/* order[0..n): indices sorted by start, ties in file order; NULL on no memory */
static int64_t *start_order(const void *rows, size_t stride, int64_t n) {
    int64_t *order = malloc((size_t)(n ? n : 1) * sizeof *order);
    if (!order) return NULL;
    const char *r = rows;
    int sorted = 1;
    for (int64_t i = 1; i < n && sorted; i++)
        sorted = *(const int64_t *)(r + (size_t)(i - 1) * stride) <= *(const int64_t *)(r + (size_t)i * stride);
    if (sorted) {
        for (int64_t i = 0; i < n; i++) order[i] = i;
        return order;
    }
    kv_t *a = malloc((size_t)n * sizeof *a), *tmp = malloc((size_t)(n / 2 + 1) * sizeof *tmp);
    if (!a || !tmp) { free(a); free(tmp); free(order); return NULL; }
    for (int64_t i = 0; i < n; i++) a[i] = (kv_t){*(const int64_t *)(r + (size_t)i * stride), i};
    merge_sort(a, tmp, n);
    for (int64_t i = 0; i < n; i++) order[i] = a[i].idx;
    free(a); free(tmp);
    return order;
}

/* ------------------------------------------------------------------ whole-line writing (LineWriter's semantics) */
#define BLOCK (1 << 20)

typedef struct {
    int fd; const char *path; int64_t size;  /* size: bytes of whole lines on disk */
    char *buf; size_t used; int err;
} out_t;

static int out_open(out_t *o, const char *path) {
    memset(o, 0, sizeof *o);
    o->path = path;
    o->buf = malloc(BLOCK + 4096);
    if (!o->buf) return ENOMEM;
    o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (o->fd < 0) { int e = errno; free(o->buf); o->buf = NULL; return -e; }  /* negative: opening failed */
    return 0;
}

/* Writes the buffered whole lines; on an error cuts the file back to its last whole line (removes it when not even
   the header made it) and remembers errno. */
static int out_flush(out_t *o) {
    size_t done = 0;
    while (done < o->used) {
        ssize_t w = write(o->fd, o->buf + done, o->used - done);
        if (w < 0) {
            if (errno == EINTR) continue;
            o->err = errno;
            size_t whole = 0;
            for (size_t i = done; i > 0; i--)
                if (o->buf[i - 1] == '\n') { whole = i; break; }
            o->size += (int64_t)whole;
            if (o->size == 0) unlink(o->path);
            else if (ftruncate(o->fd, o->size)) { /* as LineWriter: nothing more to do */ }
            return o->err;
        }
        done += (size_t)w;
    }
    o->size += (int64_t)o->used;
    o->used = 0;
    return 0;
}

static int out_close(out_t *o) {
    int e = o->err;
    if (o->fd >= 0 && o->buf) close(o->fd);
    free(o->buf); o->buf = NULL;
    return e;
}

static inline void put(out_t *o, const char *s, size_t n) { memcpy(o->buf + o->used, s, n); o->used += n; }
#define PUT(o, s) put((o), (s), sizeof(s) - 1)

static inline void put_int(out_t *o, int64_t v) {
    char tmp[24]; int k = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do { tmp[k++] = (char)('0' + u % 10); u /= 10; } while (u);
    char *d = o->buf + o->used;
    if (v < 0) *d++ = '-';
    while (k) *d++ = tmp[--k];
    o->used = (size_t)(d - o->buf);
}

/* Room for one more line of at most `need` bytes: flushes when the block is full. Lines longer than the block
   get their own buffer growth. */
static int room(out_t *o, size_t need) {
    if (o->used + need <= BLOCK + 4096 && o->used < BLOCK) return 0;
    if (o->used && out_flush(o)) return o->err;
    if (need > BLOCK + 4096) {
        char *g = realloc(o->buf, need + 4096);
        if (!g) { o->err = ENOMEM; return ENOMEM; }
        o->buf = g;
    }
    return 0;
}

typedef struct {  /* Python's per-name results: the group (final name) of each raw name, and each group's cell */
    const int32_t *group_of; const char *cells; const int64_t *cell_off; int64_t ngroups;
} cells_t;

static inline size_t cell_len(const cells_t *c, int32_t g) { return (size_t)(c->cell_off[g + 1] - c->cell_off[g]); }

/* Durations of the written rows grouped by group, each group in row order: dur_out[group_off[g]..group_off[g+1]). */
static void group_durations(const int32_t *groups, const int64_t *durs, int64_t n, int64_t ngroups,
                            int64_t *dur_out, int64_t *group_off) {
    memset(group_off, 0, (size_t)(ngroups + 1) * sizeof *group_off);
    for (int64_t i = 0; i < n; i++) group_off[groups[i] + 1]++;
    for (int64_t g = 0; g < ngroups; g++) group_off[g + 1] += group_off[g];
    int64_t *fill = malloc((size_t)(ngroups ? ngroups : 1) * sizeof *fill);
    if (!fill) return;
    memcpy(fill, group_off, (size_t)ngroups * sizeof *fill);
    for (int64_t i = 0; i < n; i++) dur_out[fill[groups[i]]++] = durs[i];
    free(fill);
}

/* kernel_trace.csv: the first `n` rows in start order (n <= kr_count). Returns 0 or an errno. */
int kr_write_ops(const kr_trace *t, const char *path, const char *header, int64_t n, const int32_t *group_of,
                 const char *cells, const int64_t *cell_off, int64_t ngroups, int64_t *dur_out, int64_t *group_off) {
    cells_t cl = {group_of, cells, cell_off, ngroups};
    int64_t *order = start_order(t->ops, sizeof *t->ops, t->nops);
    int32_t *kid = calloc((size_t)(ngroups ? ngroups : 1), sizeof *kid);
    int32_t *row_group = malloc((size_t)(n ? n : 1) * sizeof *row_group);
    int64_t *row_dur = malloc((size_t)(n ? n : 1) * sizeof *row_dur);
    if (!order || !kid || !row_group || !row_dur) {
        free(order); free(kid); free(row_group); free(row_dur);
        return ENOMEM;
    }
    out_t o;
    int e = out_open(&o, path);
    if (e) { free(order); free(kid); free(row_group); free(row_dur); return e; }
    int32_t next_id = 0;
    put(&o, header, strlen(header));
    for (int64_t i = 0; i < n && !o.err; i++) {
        const op_t *op = &t->ops[order[i]];
        int32_t g = cl.group_of[op->name];
        if (!kid[g]) kid[g] = ++next_id;
        row_group[i] = g;
        row_dur[i] = op->dur;
        if (room(&o, cell_len(&cl, g) + 600)) break;  /* 18 integers of at most 20 characters + text */
        int64_t start = op->start + t->base, end = start + op->dur;
        if (t->cpu) {
            PUT(&o, "\"KERNEL_DISPATCH\",\"CPU\",0,0,");
            put_int(&o, op->tid);
        } else {
            const gpu_t *gx = &t->gpu[order[i]];
            PUT(&o, "\"KERNEL_DISPATCH\",\"Agent ");
            put_int(&o, gx->device); PUT(&o, "\",");
            put_int(&o, gx->stream); PUT(&o, ",");
            put_int(&o, gx->stream); PUT(&o, ",");
            put_int(&o, op->corr ? corr_get(&t->launcher, op->corr) : 0);
        }
        PUT(&o, ",");
        put_int(&o, i + 1); PUT(&o, ",");
        put_int(&o, kid[g]); PUT(&o, ",");
        put(&o, cl.cells + cl.cell_off[g], cell_len(&cl, g)); PUT(&o, ",");
        put_int(&o, op->corr); PUT(&o, ",");
        put_int(&o, start); PUT(&o, ",");
        put_int(&o, end);
        if (t->cpu) {
            PUT(&o, ",0,0,0,0,0,0,0,0,0,0,0\n");
            continue;
        }
        const gpu_t *gx = &t->gpu[order[i]];
        PUT(&o, ",");
        put_int(&o, gx->shared); PUT(&o, ",0,");
        put_int(&o, gx->regs); PUT(&o, ",0,0,");
        for (int k = 0; k < 3; k++) { put_int(&o, gx->block[k]); PUT(&o, ","); }
        for (int k = 0; k < 3; k++) {
            put_int(&o, gx->grid[k] * gx->block[k]);
            put(&o, k < 2 ? "," : "\n", 1);
        }
    }
    if (!o.err && o.used) out_flush(&o);
    e = out_close(&o);
    if (!e) group_durations(row_group, row_dur, n, ngroups, dur_out, group_off);
    free(order); free(kid); free(row_group); free(row_dur);
    return e;
}

static const char *const DOMAINS[] = {"", "", "\"CUDA_RUNTIME_API\"", "\"CUDA_DRIVER_API\"", "\"HIP_RUNTIME_API\""};

/* hip_api_trace.csv: every API row in start order; durations grouped for hip_api_stats.csv. */
int kr_write_api(const kr_trace *t, const char *path, const char *header, const int32_t *group_of,
                 const char *cells, const int64_t *cell_off, int64_t ngroups, int64_t *dur_out, int64_t *group_off) {
    cells_t cl = {group_of, cells, cell_off, ngroups};
    int64_t n = t->napi;
    int64_t *order = start_order(t->api, sizeof *t->api, n);
    int32_t *row_group = malloc((size_t)(n ? n : 1) * sizeof *row_group);
    int64_t *row_dur = malloc((size_t)(n ? n : 1) * sizeof *row_dur);
    if (!order || !row_group || !row_dur) { free(order); free(row_group); free(row_dur); return ENOMEM; }
    out_t o;
    int e = out_open(&o, path);
    if (e) { free(order); free(row_group); free(row_dur); return e; }
    put(&o, header, strlen(header));
    for (int64_t i = 0; i < n && !o.err; i++) {
        const api_t *a = &t->api[order[i]];
        int32_t g = cl.group_of[a->name];
        row_group[i] = g;
        row_dur[i] = a->dur;
        if (room(&o, cell_len(&cl, g) + 400)) break;
        put(&o, DOMAINS[a->cat], strlen(DOMAINS[a->cat])); PUT(&o, ",");
        put(&o, cl.cells + cl.cell_off[g], cell_len(&cl, g)); PUT(&o, ",");
        put_int(&o, a->pid); PUT(&o, ",");
        put_int(&o, a->tid); PUT(&o, ",");
        put_int(&o, a->corr); PUT(&o, ",");
        put_int(&o, a->start + t->base); PUT(&o, ",");
        put_int(&o, a->start + t->base + a->dur); PUT(&o, "\n");
    }
    if (!o.err && o.used) out_flush(&o);
    e = out_close(&o);
    if (!e) group_durations(row_group, row_dur, n, ngroups, dur_out, group_off);
    free(order); free(row_group); free(row_dur);
    return e;
}

/* memory_copy_trace.csv: `cells` per group are the direction's cell; host_of[group]: bit 0 the source is the host,
   bit 1 the destination. */
int kr_write_copies(const kr_trace *t, const char *path, const char *header, const int32_t *group_of,
                    const char *cells, const int64_t *cell_off, int64_t ngroups, const uint8_t *host_of) {
    cells_t cl = {group_of, cells, cell_off, ngroups};
    int64_t n = t->ncopies;
    int64_t *order = start_order(t->copies, sizeof *t->copies, n);
    if (!order) return ENOMEM;
    out_t o;
    int e = out_open(&o, path);
    if (e) { free(order); return e; }
    put(&o, header, strlen(header));
    for (int64_t i = 0; i < n && !o.err; i++) {
        const copy_t *c = &t->copies[order[i]];
        int32_t g = cl.group_of[c->name];
        if (room(&o, cell_len(&cl, g) + 400)) break;
        PUT(&o, "\"MEMORY_COPY\",");
        put(&o, cl.cells + cl.cell_off[g], cell_len(&cl, g)); PUT(&o, ",");
        put_int(&o, c->stream); PUT(&o, ",");
        for (int side = 0; side < 2; side++) {
            if (host_of[g] & (1 << side)) PUT(&o, "\"CPU\",");
            else { PUT(&o, "\"Agent "); put_int(&o, c->device); PUT(&o, "\","); }
        }
        put_int(&o, c->corr); PUT(&o, ",");
        put_int(&o, c->start + t->base); PUT(&o, ",");
        put_int(&o, c->start + t->base + c->dur); PUT(&o, "\n");
    }
    if (!o.err && o.used) out_flush(&o);
    e = out_close(&o);
    free(order);
    return e;
}

void kr_free(kr_trace *t) {
    if (!t) return;
    if (t->map) munmap((void *)t->map, t->size);
    free(t->ops); free(t->gpu); free(t->api); free(t->copies);
    for (int i = 0; i < 3; i++) { free(t->names[i].names); free(t->names[i].slots); }
    free(t->launcher.keys); free(t->launcher.vals); free(t->launcher.used);
    free(t);
}
