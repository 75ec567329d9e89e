/* CUPTI records -> the Chrome trace JSON, in Kineto's layout, for the CUPTI backend (tracer/cupti_json.py).
 *
 * Runs once, when a tracing window closes (at exit or in a SIGTERM's grace period), on the copied activity buffers
 * and the libcudart interposer's record windows. Two passes:
 *   scan:  walks every buffer with CUPTI's own cuptiActivityGetNextRecord (a function pointer from Python), counts
 *          records per kind, finds the earliest start (the trace's base time) and collects the keys whose text needs
 *          Python: kernel name pointers (demangled there), API callback ids, interposed function ids, copy and set
 *          kinds. Python then hands back one JSON string (or args fragment) per key, escaped by the json module.
 *   write: walks them again and writes one event per record, numbers formatted here, times exact integer
 *          nanoseconds from the base printed as microseconds with three decimals.
 * No CUDA or CUPTI header: where each field sits comes from cupti-python's record dtypes (cupti_records.Layout), as
 * an int table (kind value, field count, then offset, size, signed per field, in cupti_records.FIELDS order).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CUPTI_JSON_VERSION 1
#define STATUS_MAX_LIMIT_REACHED 12 /* cuptiActivityGetNextRecord: no more records */
#define DRIVER_DOMAIN 1             /* api_record.domain of a driver call outside libcudart (cbid: CUPTI's) */
#define COUNTED_KINDS 1024          /* kinds counted one by one; others in the last slot */

enum { KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER, N_KINDS };
/* field indices: cupti_records.FIELDS order */
enum { F_START, F_END, F_CORR };
enum { K_NAME = 3, K_DEVICE, K_CONTEXT, K_STREAM, K_GX, K_GY, K_GZ, K_BX, K_BY, K_BZ, K_REGS, K_SSHM, K_DSHM, K_GRAPH,
       K_N };
enum { C_DEVICE = 3, C_STREAM, C_COPY, C_SRC, C_DST, C_BYTES, C_N };
enum { S_DEVICE = 3, S_STREAM, S_MEMKIND, S_BYTES, S_VALUE, S_N };
enum { A_CBID = 3, A_PID, A_TID, A_N };
static const int FIELD_COUNT[N_KINDS] = {K_N, C_N, S_N, A_N, A_N};
#define MAX_FIELDS K_N

/* the keys whose text comes from Python */
enum { T_KERNEL, T_RUNTIME, T_DRIVER, T_FUNCTION, T_COPY_NAME, T_SET_NAME, T_COPY_ARGS, N_TABLES };

typedef struct {
    uint32_t offset, size, is_signed;
} field;

typedef struct {
    int32_t value; /* the CUpti_ActivityKind */
    size_t extent; /* bytes of the record the fields cover */
    field f[MAX_FIELDS];
} layout;

typedef struct { /* open addressing, key -> index in insertion order */
    uint64_t *keys;
    uint32_t *slots; /* index + 1; 0 = empty */
    size_t n, cap;
    uint64_t *order; /* keys by index */
    char *text;      /* Python's JSON text for key i: text[start[i] .. start[i+1]) */
    uint64_t *start;
} table;

typedef struct {
    const uint8_t *data;
    size_t size;
    uint8_t *owned; /* an aligned copy when the bytes were not 8-byte aligned */
} span;

typedef struct {
    const uint8_t *data; /* 32-byte api_record each */
    size_t count;
    int64_t t0, ns0;
    double rate;
} window;

typedef int (*next_record_fn)(const uint8_t *, size_t, const uint8_t **);

typedef struct {
    layout lay[N_KINDS];
    int8_t kind_of[COUNTED_KINDS]; /* CUpti_ActivityKind -> our kind, -1 none */
    next_record_fn next;
    span *spans;
    size_t n_spans, cap_spans;
    window *windows;
    size_t n_windows, cap_windows;
    table tables[N_TABLES];
    uint64_t counts[COUNTED_KINDS + 1];
    int64_t base;
    int have_base;
    uint64_t events;
    char error[256];
} session;

/* ------------------------------------------------------------------ small helpers */
static int grow(void **array, size_t *cap, size_t item, size_t need) {
    if (need <= *cap)
        return 0;
    size_t cap2 = *cap ? *cap * 2 : 16;
    while (cap2 < need)
        cap2 *= 2;
    void *bigger = realloc(*array, cap2 * item);
    if (!bigger)
        return -1;
    *array = bigger;
    *cap = cap2;
    return 0;
}

static uint64_t mix(uint64_t k) { /* splitmix64's finalizer: pointers and small ids spread over the slots */
    k ^= k >> 30;
    k *= 0xbf58476d1ce4e5b9ull;
    k ^= k >> 27;
    k *= 0x94d049bb133111ebull;
    return k ^ (k >> 31);
}

/* index of key, or (uint32_t)-1 */
static uint32_t table_find(const table *t, uint64_t key) {
    if (!t->cap)
        return (uint32_t)-1;
    size_t mask = t->cap - 1;
    for (size_t i = mix(key) & mask;; i = (i + 1) & mask) {
        if (!t->slots[i])
            return (uint32_t)-1;
        if (t->keys[i] == key)
            return t->slots[i] - 1;
    }
}

static int table_add(table *t, uint64_t key) {
    if ((t->n + 1) * 2 > t->cap) { /* at most half full */
        size_t cap2 = t->cap ? t->cap * 2 : 64;
        uint64_t *keys = calloc(cap2, sizeof *keys);
        uint32_t *slots = calloc(cap2, sizeof *slots);
        uint64_t *order = realloc(t->order, cap2 * sizeof *order);
        if (!keys || !slots || !order) {
            free(keys);
            free(slots);
            if (order)
                t->order = order;
            return -1;
        }
        t->order = order;
        for (size_t i = 0; i < t->cap; i++) {
            if (!t->slots[i])
                continue;
            size_t j = mix(t->keys[i]) & (cap2 - 1);
            while (slots[j])
                j = (j + 1) & (cap2 - 1);
            keys[j] = t->keys[i];
            slots[j] = t->slots[i];
        }
        free(t->keys);
        free(t->slots);
        t->keys = keys;
        t->slots = slots;
        t->cap = cap2;
    }
    size_t mask = t->cap - 1;
    size_t i = mix(key) & mask;
    for (; t->slots[i]; i = (i + 1) & mask)
        if (t->keys[i] == key)
            return 0;
    t->keys[i] = key;
    t->slots[i] = (uint32_t)(t->n + 1);
    t->order[t->n++] = key;
    return 0;
}

static uint64_t get_u(const uint8_t *rec, const field *f) {
    uint64_t v = 0;
    memcpy(&v, rec + f->offset, f->size); /* little-endian: the low bytes */
    if (f->is_signed && f->size < 8 && (v >> (8 * f->size - 1)) & 1)
        v |= ~0ull << (8 * f->size);
    return v;
}

static int64_t get_i(const uint8_t *rec, const field *f) { return (int64_t)get_u(rec, f); }

/* ------------------------------------------------------------------ output */
typedef struct {
    int fd;
    char *buf;
    size_t n, cap;
    int err;
} out;

static void write_all(out *o, const char *data, size_t len) {
    size_t done = 0;
    while (done < len && !o->err) {
        ssize_t w = write(o->fd, data + done, len - done);
        if (w < 0) {
            if (errno != EINTR)
                o->err = errno;
        } else {
            done += (size_t)w;
        }
    }
}

static void flush_out(out *o) {
    write_all(o, o->buf, o->n);
    o->n = 0;
}

static inline void room(out *o, size_t need) {
    if (o->n + need > o->cap)
        flush_out(o);
}

static inline void put(out *o, const char *s, size_t len) {
    if (len > o->cap) { /* longer than the buffer (a huge name): straight from where it is */
        flush_out(o);
        write_all(o, s, len);
        return;
    }
    room(o, len);
    memcpy(o->buf + o->n, s, len);
    o->n += len;
}

#define PUT(o, literal) put((o), literal, sizeof(literal) - 1)

static inline void put_u(out *o, uint64_t v) {
    char tmp[24];
    int i = 24;
    do {
        tmp[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(o, tmp + i, (size_t)(24 - i));
}

static inline void put_i(out *o, int64_t v) {
    if (v < 0) {
        PUT(o, "-");
        put_u(o, (uint64_t)0 - (uint64_t)v);
    } else {
        put_u(o, (uint64_t)v);
    }
}

static inline void put_field(out *o, const uint8_t *rec, const field *f) {
    if (f->is_signed)
        put_i(o, get_i(rec, f));
    else
        put_u(o, get_u(rec, f));
}

/* nanoseconds as microseconds with three decimals */
static inline void put_us(out *o, int64_t ns) {
    uint64_t v = ns < 0 ? (uint64_t)0 - (uint64_t)ns : (uint64_t)ns;
    if (ns < 0)
        PUT(o, "-");
    put_u(o, v / 1000);
    char frac[4] = {'.', (char)('0' + v / 100 % 10), (char)('0' + v / 10 % 10), (char)('0' + v % 10)};
    put(o, frac, 4);
}

static void put_text(out *o, const table *t, uint64_t key) {
    uint32_t i = table_find(t, key);
    if (i == (uint32_t)-1 || !t->start) {
        PUT(o, "\"\"");
        return;
    }
    put(o, t->text + t->start[i], (size_t)(t->start[i + 1] - t->start[i]));
}

/* ------------------------------------------------------------------ the interface */
int cupti_json_version(void) { return CUPTI_JSON_VERSION; }

/* spec: per kind (KERNEL, MEMCPY, MEMSET, RUNTIME, DRIVER): value, field count, then offset, size, signed per field */
session *cupti_json_new(const int32_t *spec, size_t spec_len, next_record_fn next) {
    session *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    memset(s->kind_of, -1, sizeof s->kind_of);
    s->next = next;
    size_t p = 0;
    for (int k = 0; k < N_KINDS; k++) {
        if (p + 2 > spec_len || spec[p + 1] != FIELD_COUNT[k] || p + 2 + 3 * (size_t)FIELD_COUNT[k] > spec_len)
            goto bad;
        layout *L = &s->lay[k];
        L->value = spec[p];
        p += 2;
        for (int i = 0; i < FIELD_COUNT[k]; i++, p += 3) {
            field *f = &L->f[i];
            f->offset = (uint32_t)spec[p];
            f->size = (uint32_t)spec[p + 1];
            f->is_signed = (uint32_t)spec[p + 2];
            if (spec[p] < 0 || !(f->size == 1 || f->size == 2 || f->size == 4 || f->size == 8))
                goto bad;
            if (f->offset + f->size > L->extent)
                L->extent = f->offset + f->size;
        }
        if (L->value < 0 || L->value >= COUNTED_KINDS)
            goto bad;
        s->kind_of[L->value] = (int8_t)k;
    }
    if (p != spec_len)
        goto bad;
    return s;
bad:
    free(s);
    return NULL;
}

const char *cupti_json_error(const session *s) { return s->error; }

void cupti_json_free(session *s) {
    if (!s)
        return;
    for (size_t i = 0; i < s->n_spans; i++)
        free(s->spans[i].owned);
    free(s->spans);
    free(s->windows);
    for (int t = 0; t < N_TABLES; t++) {
        free(s->tables[t].keys);
        free(s->tables[t].slots);
        free(s->tables[t].order);
        free(s->tables[t].text);
        free(s->tables[t].start);
    }
    free(s);
}

static int oom(session *s) {
    snprintf(s->error, sizeof s->error, "out of memory");
    return -1;
}

static void see_start(session *s, int64_t start) {
    if (start && (!s->have_base || start < s->base)) {
        s->base = start;
        s->have_base = 1;
    }
}

/* One completed activity buffer (the caller keeps the bytes alive until cupti_json_free). 0, or -1 (see error). */
int cupti_json_add_buffer(session *s, const uint8_t *data, size_t size) {
    if (!size)
        return 0;
    if (grow((void **)&s->spans, &s->cap_spans, sizeof *s->spans, s->n_spans + 1))
        return oom(s);
    span *sp = &s->spans[s->n_spans];
    sp->data = data;
    sp->size = size;
    sp->owned = NULL;
    if ((uintptr_t)data & 7) { /* CUPTI's records are 8-byte aligned in its buffers: keep them so */
        void *copy = NULL;
        if (posix_memalign(&copy, 64, size))
            return oom(s);
        memcpy(copy, data, size);
        sp->owned = copy;
        sp->data = copy;
    }
    s->n_spans++;
    const uint8_t *rec = NULL;
    int status;
    while ((status = s->next(sp->data, size, &rec)) == 0) {
        size_t off = (size_t)(rec - sp->data);
        if (rec < sp->data || off + 4 > size) {
            snprintf(s->error, sizeof s->error, "cuptiActivityGetNextRecord gave a record outside the buffer");
            return -1;
        }
        int32_t value;
        memcpy(&value, rec, 4);
        s->counts[value >= 0 && value < COUNTED_KINDS ? value : COUNTED_KINDS]++;
        int k = value >= 0 && value < COUNTED_KINDS ? s->kind_of[value] : -1;
        if (k < 0)
            continue;
        const layout *L = &s->lay[k];
        if (off + L->extent > size) {
            snprintf(s->error, sizeof s->error, "a record of kind %d ends past its buffer (%zu + %zu > %zu bytes)",
                     value, off, L->extent, size);
            return -1;
        }
        see_start(s, get_i(rec, &L->f[F_START]));
        int bad = 0;
        switch (k) {
        case KERNEL:
            bad = table_add(&s->tables[T_KERNEL], get_u(rec, &L->f[K_NAME]));
            break;
        case MEMCPY:
            bad = table_add(&s->tables[T_COPY_NAME], get_u(rec, &L->f[C_COPY]) << 32 |
                                                         (get_u(rec, &L->f[C_SRC]) & 0xffff) << 16 |
                                                         (get_u(rec, &L->f[C_DST]) & 0xffff)) ||
                  table_add(&s->tables[T_COPY_ARGS], get_u(rec, &L->f[C_COPY]));
            break;
        case MEMSET:
            bad = table_add(&s->tables[T_SET_NAME], get_u(rec, &L->f[S_MEMKIND]));
            break;
        case RUNTIME:
            bad = table_add(&s->tables[T_RUNTIME], get_u(rec, &L->f[A_CBID]));
            break;
        case DRIVER:
            bad = table_add(&s->tables[T_DRIVER], get_u(rec, &L->f[A_CBID]));
            break;
        }
        if (bad)
            return oom(s);
        s->events++;
    }
    if (status != STATUS_MAX_LIMIT_REACHED) {
        snprintf(s->error, sizeof s->error, "cuptiActivityGetNextRecord failed with CUPTI status %d", status);
        return -1;
    }
    return 0;
}

typedef struct {
    uint64_t start, end;
    uint32_t correlation, function, thread, domain;
} api_record; /* native/api_recorder.c's record */

/* Python's round() of a float: to nearest, half to even (without libm, which the build does not link) */
static inline int64_t round_even(double x) {
    int64_t t = (int64_t)x; /* toward zero; x - t is exact (from 2**52 up, x is a whole number) */
    double r = x - (double)t;
    if (r > 0.5 || (r == 0.5 && (t & 1)))
        t++;
    else if (r < -0.5 || (r == -0.5 && (t & 1)))
        t--;
    return t;
}

static inline int64_t window_ns(const window *w, uint64_t tick) {
    /* Window.ns: ns0 + round((tick - t0) * rate) */
    return w->ns0 + round_even((double)((int64_t)tick - w->t0) * w->rate);
}

/* One window of the interposer's records: `count` 32-byte records and its tick -> ns line. 0, or -1. */
int cupti_json_add_window(session *s, const uint8_t *data, size_t count, int64_t t0, int64_t ns0, double rate) {
    if (!count)
        return 0;
    if (grow((void **)&s->windows, &s->cap_windows, sizeof *s->windows, s->n_windows + 1))
        return oom(s);
    window *w = &s->windows[s->n_windows++];
    w->data = data;
    w->count = count;
    w->t0 = t0;
    w->ns0 = ns0;
    w->rate = rate;
    int32_t runtime_value = s->lay[RUNTIME].value, driver_value = s->lay[DRIVER].value;
    for (size_t i = 0; i < count; i++) {
        api_record r;
        memcpy(&r, data + i * sizeof r, sizeof r);
        see_start(s, window_ns(w, r.start));
        int driver = r.domain == DRIVER_DOMAIN;
        s->counts[driver ? driver_value : runtime_value]++;
        if (table_add(&s->tables[driver ? T_DRIVER : T_FUNCTION], r.function))
            return oom(s);
    }
    s->events += count;
    return 0;
}

int64_t cupti_json_base(const session *s) { return s->have_base ? s->base : 0; }

uint64_t cupti_json_events(const session *s) { return s->events; }

/* counts[kind] for kind < COUNTED_KINDS; out[COUNTED_KINDS]: records of other kinds */
void cupti_json_counts(const session *s, uint64_t *out) { memcpy(out, s->counts, sizeof s->counts); }

size_t cupti_json_keys(const session *s, int which, uint64_t *out, size_t max) {
    if (which < 0 || which >= N_TABLES)
        return 0;
    const table *t = &s->tables[which];
    if (out && t->n && max) /* order is NULL while the table is empty */
        memcpy(out, t->order, (t->n < max ? t->n : max) * sizeof *out);
    return t->n;
}

/* The text of table `which`'s keys, in cupti_json_keys' order: `text`, with key i at [start[i], start[i+1]). */
int cupti_json_set_text(session *s, int which, const char *text, const uint64_t *start, size_t n) {
    if (which < 0 || which >= N_TABLES || n != s->tables[which].n) {
        snprintf(s->error, sizeof s->error, "text for table %d: %zu entries, expected %zu", which, n,
                 which >= 0 && which < N_TABLES ? s->tables[which].n : 0);
        return -1;
    }
    table *t = &s->tables[which];
    free(t->text);
    free(t->start);
    t->text = malloc(start[n] ? start[n] : 1);
    t->start = malloc((n + 1) * sizeof *t->start);
    if (!t->text || !t->start)
        return oom(s);
    if (start[n])
        memcpy(t->text, text, start[n]);
    memcpy(t->start, start, (n + 1) * sizeof *t->start);
    return 0;
}

static void head(out *o, int *first, const char *cat, size_t cat_len) {
    if (*first)
        *first = 0;
    else
        PUT(o, ",\n");
    PUT(o, "{\"ph\": \"X\", \"cat\": \"");
    put(o, cat, cat_len);
    PUT(o, "\", \"name\": ");
}

static void times(out *o, int64_t base, int64_t start, int64_t end) {
    PUT(o, ", \"ts\": ");
    put_us(o, start - base);
    PUT(o, ", \"dur\": ");
    put_us(o, end > start ? end - start : 0);
}

static void write_activity(session *s, out *o, const span *sp, int64_t pid, int *first) {
    const uint8_t *rec = NULL;
    int64_t base = cupti_json_base(s);
    while (s->next(sp->data, sp->size, &rec) == 0) {
        int32_t value;
        memcpy(&value, rec, 4);
        int k = value >= 0 && value < COUNTED_KINDS ? s->kind_of[value] : -1;
        if (k < 0)
            continue;
        const field *f = s->lay[k].f;
        int64_t start = get_i(rec, &f[F_START]), end = get_i(rec, &f[F_END]);
        room(o, 512);
        switch (k) {
        case KERNEL:
            head(o, first, "kernel", 6);
            put_text(o, &s->tables[T_KERNEL], get_u(rec, &f[K_NAME]));
            PUT(o, ", \"pid\": ");
            put_field(o, rec, &f[K_DEVICE]);
            PUT(o, ", \"tid\": ");
            put_field(o, rec, &f[K_STREAM]);
            times(o, base, start, end);
            PUT(o, ", \"args\": {\"device\": ");
            put_field(o, rec, &f[K_DEVICE]);
            PUT(o, ", \"context\": ");
            put_field(o, rec, &f[K_CONTEXT]);
            PUT(o, ", \"stream\": ");
            put_field(o, rec, &f[K_STREAM]);
            PUT(o, ", \"correlation\": ");
            put_field(o, rec, &f[F_CORR]);
            PUT(o, ", \"registers per thread\": ");
            put_field(o, rec, &f[K_REGS]);
            PUT(o, ", \"shared memory\": ");
            put_i(o, get_i(rec, &f[K_SSHM]) + get_i(rec, &f[K_DSHM]));
            PUT(o, ", \"grid\": [");
            put_field(o, rec, &f[K_GX]);
            PUT(o, ", ");
            put_field(o, rec, &f[K_GY]);
            PUT(o, ", ");
            put_field(o, rec, &f[K_GZ]);
            PUT(o, "], \"block\": [");
            put_field(o, rec, &f[K_BX]);
            PUT(o, ", ");
            put_field(o, rec, &f[K_BY]);
            PUT(o, ", ");
            put_field(o, rec, &f[K_BZ]);
            PUT(o, "], \"graph id\": ");
            put_field(o, rec, &f[K_GRAPH]);
            PUT(o, "}}");
            break;
        case MEMCPY: {
            uint64_t copy = get_u(rec, &f[C_COPY]);
            head(o, first, "gpu_memcpy", 10);
            put_text(o, &s->tables[T_COPY_NAME],
                     copy << 32 | (get_u(rec, &f[C_SRC]) & 0xffff) << 16 | (get_u(rec, &f[C_DST]) & 0xffff));
            PUT(o, ", \"pid\": ");
            put_field(o, rec, &f[C_DEVICE]);
            PUT(o, ", \"tid\": ");
            put_field(o, rec, &f[C_STREAM]);
            times(o, base, start, end);
            PUT(o, ", \"args\": {\"device\": ");
            put_field(o, rec, &f[C_DEVICE]);
            PUT(o, ", \"stream\": ");
            put_field(o, rec, &f[C_STREAM]);
            PUT(o, ", \"correlation\": ");
            put_field(o, rec, &f[F_CORR]);
            PUT(o, ", \"bytes\": ");
            put_field(o, rec, &f[C_BYTES]);
            PUT(o, ", ");
            put_text(o, &s->tables[T_COPY_ARGS], copy);
            PUT(o, "}}");
            break;
        }
        case MEMSET:
            head(o, first, "gpu_memset", 10);
            put_text(o, &s->tables[T_SET_NAME], get_u(rec, &f[S_MEMKIND]));
            PUT(o, ", \"pid\": ");
            put_field(o, rec, &f[S_DEVICE]);
            PUT(o, ", \"tid\": ");
            put_field(o, rec, &f[S_STREAM]);
            times(o, base, start, end);
            PUT(o, ", \"args\": {\"device\": ");
            put_field(o, rec, &f[S_DEVICE]);
            PUT(o, ", \"stream\": ");
            put_field(o, rec, &f[S_STREAM]);
            PUT(o, ", \"correlation\": ");
            put_field(o, rec, &f[F_CORR]);
            PUT(o, ", \"bytes\": ");
            put_field(o, rec, &f[S_BYTES]);
            PUT(o, ", \"value\": ");
            put_field(o, rec, &f[S_VALUE]);
            PUT(o, "}}");
            break;
        default: { /* RUNTIME, DRIVER */
            int runtime = k == RUNTIME;
            if (runtime)
                head(o, first, "cuda_runtime", 12);
            else
                head(o, first, "cuda_driver", 11);
            put_text(o, &s->tables[runtime ? T_RUNTIME : T_DRIVER], get_u(rec, &f[A_CBID]));
            PUT(o, ", \"pid\": ");
            uint64_t process = get_u(rec, &f[A_PID]);
            if (process)
                put_field(o, rec, &f[A_PID]);
            else
                put_i(o, pid);
            PUT(o, ", \"tid\": ");
            put_field(o, rec, &f[A_TID]);
            times(o, base, start, end);
            PUT(o, ", \"args\": {\"correlation\": ");
            put_field(o, rec, &f[F_CORR]);
            PUT(o, ", \"cbid\": ");
            put_field(o, rec, &f[A_CBID]);
            PUT(o, "}}");
        }
        }
    }
}

static void write_window(session *s, out *o, const window *w, int64_t pid, uint64_t *spare, int *first) {
    int64_t base = cupti_json_base(s);
    for (size_t i = 0; i < w->count; i++) {
        api_record r;
        memcpy(&r, w->data + i * sizeof r, sizeof r);
        int driver = r.domain == DRIVER_DOMAIN;
        room(o, 512);
        if (driver)
            head(o, first, "cuda_driver", 11);
        else
            head(o, first, "cuda_runtime", 12);
        put_text(o, &s->tables[driver ? T_DRIVER : T_FUNCTION], r.function);
        PUT(o, ", \"pid\": ");
        put_i(o, pid);
        PUT(o, ", \"tid\": ");
        put_u(o, r.thread);
        times(o, base, window_ns(w, r.start), window_ns(w, r.end));
        PUT(o, ", \"args\": {\"correlation\": ");
        if (!driver && !r.correlation) /* no GPU work: an id above CUPTI's 32-bit range, unique per call */
            put_u(o, (*spare)++);
        else
            put_u(o, r.correlation);
        PUT(o, ", \"cbid\": ");
        put_u(o, driver ? r.function : 0);
        PUT(o, "}}");
    }
}

/* Writes every event, comma-separated, at fd's position (the caller writes the head before and "]}" after).
 * 0, or -1 (see error). */
int cupti_json_write(session *s, int fd, int64_t pid) {
    out o = {fd, malloc(1 << 20), 0, 1 << 20, 0};
    if (!o.buf)
        return oom(s);
    int first = 1;
    uint64_t spare = 1ull << 32;
    for (size_t i = 0; i < s->n_spans && !o.err; i++)
        write_activity(s, &o, &s->spans[i], pid, &first);
    for (size_t i = 0; i < s->n_windows && !o.err; i++)
        write_window(s, &o, &s->windows[i], pid, &spare, &first);
    flush_out(&o);
    free(o.buf);
    if (o.err) {
        snprintf(s->error, sizeof s->error, "cannot write the trace: %s", strerror(o.err));
        errno = o.err;
        return -1;
    }
    return 0;
}
