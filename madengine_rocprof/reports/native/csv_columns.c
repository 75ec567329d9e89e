/* One pass over a per-dispatch CSV trace (rocprofv3 kernel_trace.csv and its kin) for reports/csv_native.py: checks
every line, by stricter rules than csv_readers' line guard, and extracts the columns the report needs as Arrow
arrays.

The pass only vouches for the plain layout rocprofv3 writes, a strict subset of what the guard and polars accept:
  - every line ends with LF (the last may end at end of file) and has exactly ncols fields, or is blank (skipped, as
    the csv module's reader skips it; the Python path's polars guard cannot judge blank lines, so such a file gets
    the csv module's table there: the same values, with String instead of Categorical names);
  - a field is either unquoted without quotes, or wholly quoted without quotes inside (no "" escapes);
  - no byte below 0x20 other than TAB anywhere (no CR, NUL or other control byte), no UTF-8 byte order mark;
  - the two time columns are unquoted ASCII digits within int64, end not before start;
  - the string columns' distinct values are valid UTF-8; the first string column (the kernel name) is never empty;
  - at least one data row.
Anything else sets CC_FALLBACK with a reason, and Python reads the file the way it always did (guard, polars, csv
module), so an error message or a value never depends on which path ran. String columns come back as dictionary
arrays (int32 codes in first-seen order, large UTF-8 dictionary), times as int64 arrays; each array owns its buffers
and frees them in its release callback (the Arrow C data interface, moved into polars without a copy).
Plain C11 and POSIX only.
*/
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define CC_OK 0
#define CC_FALLBACK 1
#define CC_NOMEM 2
#define CC_IOERROR 3
#define MAX_STR 8

struct ArrowSchema {
    const char *format; const char *name; const char *metadata; int64_t flags; int64_t n_children;
    struct ArrowSchema **children; struct ArrowSchema *dictionary;
    void (*release)(struct ArrowSchema *); void *private_data;
};

struct ArrowArray {
    int64_t length; int64_t null_count; int64_t offset; int64_t n_buffers; int64_t n_children;
    const void **buffers; struct ArrowArray **children; struct ArrowArray *dictionary;
    void (*release)(struct ArrowArray *); void *private_data;
};

typedef struct {  /* distinct values of one string column: text arena, offsets, open-addressing hash -> code */
    char *text; int64_t text_len, text_cap;
    int64_t *offsets; int64_t count, cap;
    int32_t *slots; uint64_t *hashes; int64_t nslots, hashes_cap;
    int32_t *codes; /* per row */
    int32_t last; /* the previous row's code: runs of one value are common (agent, queue) */
} column_t;

typedef struct {
    int status;
    char reason[200];
    int ncols, nstr;
    int64_t rows, cap;
    int64_t *start, *end;
    column_t str[MAX_STR];
    signed char *slot; /* per field: its place in the row (0 start, 1 end, 2 + k string k) or -1 */
    int64_t line; /* 1-based line number being read, for the reason */
    struct ArrowSchema dict_schema; /* the dictionaries' schema, shared by the exported dictionary schemas */
} table_t;

static void fallback(table_t *t, const char *what) {
    if (t->status == CC_OK) {
        t->status = CC_FALLBACK;
        snprintf(t->reason, sizeof t->reason, "line %lld: %s", (long long)t->line, what);
    }
}

static int grow(void **ptr, int64_t *cap, int64_t need, size_t item) {
    if (need <= *cap) return 1;
    int64_t c = *cap ? *cap : 1024;
    while (c < need) c *= 2;
    void *p = realloc(*ptr, (size_t)c * item);
    if (!p) return 0;
    *ptr = p;
    *cap = c;
    return 1;
}

static uint64_t hash_bytes(const char *s, int64_t n) {  /* 8 bytes a step: names are long */
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)n, w;
    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
        h ^= h >> 32;
    }
    w = 0;
    memcpy(&w, s, (size_t)n);
    h = (h ^ w) * 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 29);
}

static int rehash(column_t *c) {
    int64_t n = c->nslots ? c->nslots * 2 : 256;
    int32_t *slots = malloc((size_t)n * sizeof *slots);
    if (!slots) return 0;
    memset(slots, 0xff, (size_t)n * sizeof *slots);
    for (int64_t id = 0; id < c->count; id++) {
        uint64_t i = c->hashes[id] & (uint64_t)(n - 1);
        while (slots[i] >= 0) i = (i + 1) & (uint64_t)(n - 1);
        slots[i] = (int32_t)id;
    }
    free(c->slots);
    c->slots = slots;
    c->nslots = n;
    return 1;
}

/* the code of s[0..n) in column c, added in first-seen order; -1: out of memory or too many values */
static int32_t intern(column_t *c, const char *s, int64_t n) {
    if (c->last >= 0) {
        int64_t lo = c->offsets[c->last], len = c->offsets[c->last + 1] - lo;
        if (len == n && memcmp(c->text + lo, s, (size_t)n) == 0) return c->last;
    }
    uint64_t h = hash_bytes(s, n);
    if ((c->count + 1) * 2 > c->nslots && !rehash(c)) return -1;
    uint64_t mask = (uint64_t)(c->nslots - 1), i = h & mask;
    for (; c->slots[i] >= 0; i = (i + 1) & mask) {
        int32_t id = c->slots[i];
        int64_t lo = c->offsets[id], len = c->offsets[id + 1] - lo;
        if (c->hashes[id] == h && len == n && memcmp(c->text + lo, s, (size_t)n) == 0) return c->last = id;
    }
    if (c->count >= INT32_MAX - 1) return -1;
    if (!grow((void **)&c->offsets, &c->cap, c->count + 2, sizeof *c->offsets)) return -1;
    if (!grow((void **)&c->hashes, &c->hashes_cap, c->count + 2, sizeof *c->hashes)) return -1;
    if (!grow((void **)&c->text, &c->text_cap, c->text_len + n + 1, 1)) return -1;
    if (c->count == 0) c->offsets[0] = 0;
    memcpy(c->text + c->text_len, s, (size_t)n);
    c->text_len += n;
    c->hashes[c->count] = h;
    c->offsets[c->count + 1] = c->text_len;
    c->slots[i] = (int32_t)c->count;
    return c->last = (int32_t)c->count++;
}

/* byte classes: 0 ordinary, 1 comma, 2 quote, 3 LF, 4 refused (control bytes other than TAB); in a quoted field a
   comma is ordinary */
static unsigned char cls[256], clsq[256];

#define ONES 0x0101010101010101ULL
#define HIGHS 0x8080808080808080ULL
/* whether any of 8 bytes is a quote or below 0x20 (and, with comma set, a comma): a word without one is skipped */
static inline int special(uint64_t v, int comma) {
    uint64_t q = v ^ (ONES * '"'), m = ((q - ONES) & ~q) | ((v - ONES * 0x20) & ~v);
    if (comma) {
        uint64_t c = v ^ (ONES * ',');
        m |= (c - ONES) & ~c;
    }
    return (m & HIGHS) != 0;
}

static void init_classes(void) {
    for (int b = 0; b < 32; b++) cls[b] = 4;
    cls['\t'] = 0;
    cls[','] = 1;
    cls['"'] = 2;
    cls['\n'] = 3;
    memcpy(clsq, cls, sizeof cls);
    clsq[','] = 0;
}

static int parse_digits(const char *s, int64_t n, int64_t *out) {
    if (n < 1 || n > 19) return 0;
    uint64_t v = 0;
    for (int64_t i = 0; i < n; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9) return 0;
        v = v * 10 + d;
    }
    if (v > (uint64_t)INT64_MAX) return 0;
    *out = (int64_t)v;
    return 1;
}

static int utf8_valid(const unsigned char *s, int64_t n) {
    int64_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        if (c < 0x80) { i++; continue; }
        int len; unsigned min;
        if (c >= 0xc2 && c <= 0xdf) { len = 2; min = 0x80; }
        else if (c >= 0xe0 && c <= 0xef) { len = 3; min = 0x800; }
        else if (c >= 0xf0 && c <= 0xf4) { len = 4; min = 0x10000; }
        else return 0;
        if (i + len > n) return 0;
        unsigned v = c & (0x7f >> len);
        for (int k = 1; k < len; k++) {
            if ((s[i + k] & 0xc0) != 0x80) return 0;
            v = (v << 6) | (s[i + k] & 0x3f);
        }
        if (v < min || v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) return 0;
        i += len;
    }
    return 1;
}

/* One line at p, which ends with an LF. header: only its shape is checked. Returns the next line, or NULL to stop
   (the status says why). */
static const char *read_line(table_t *t, const char *p, int header) {
    if (*p == '\n') { fallback(t, "a blank header line"); return NULL; }
    const char *fs[2 + MAX_STR]; int64_t fn[2 + MAX_STR];
    const signed char *slot = header ? NULL : t->slot;
    int field = 0, ncols = t->ncols;
    for (;;) {
        const char *f, *e;
        unsigned char c;
        if (*p == '"') {
            f = ++p;
            for (uint64_t v; memcpy(&v, p, 8), !special(v, 0);) p += 8;
            while (!clsq[(unsigned char)*p]) p++;
            if (*p != '"') { fallback(t, *p == '\n' ? "a quoted field runs past the line" : "a control byte"); return NULL; }
            e = p++;
            c = cls[(unsigned char)*p];
            if (c != 1 && c != 3) { fallback(t, "a quote inside a field"); return NULL; }
            if (slot && field < ncols && slot[field] >= 0 && slot[field] < 2) { fallback(t, "a quoted timestamp"); return NULL; }
        } else {
            f = p;
            for (uint64_t v; memcpy(&v, p, 8), !special(v, 1);) p += 8;
            while (!cls[(unsigned char)*p]) p++;
            e = p;
            c = cls[(unsigned char)*p];
            if (c != 1 && c != 3) { fallback(t, c == 2 ? "a quote inside a field" : "a control byte"); return NULL; }
        }
        if (field >= ncols) { fallback(t, "more fields than the header"); return NULL; }
        if (slot && slot[field] >= 0) { fs[slot[field]] = f; fn[slot[field]] = e - f; }
        field++;
        p++; /* the comma or the LF */
        if (c == 3) break;
    }
    if (field != ncols) { fallback(t, "fewer fields than the header"); return NULL; }
    if (header) return p;
    int64_t s, en;
    if (!parse_digits(fs[0], fn[0], &s) || !parse_digits(fs[1], fn[1], &en)) {
        fallback(t, "a timestamp that is not plain digits within int64");
        return NULL;
    }
    if (en < s) { fallback(t, "End_Timestamp before Start_Timestamp"); return NULL; }
    if (fn[2] == 0) { fallback(t, "an empty kernel name"); return NULL; }
    if (t->rows == t->cap) {
        int64_t cap = t->cap, need = t->rows + 1;
        if (!grow((void **)&t->start, &cap, need, sizeof *t->start)) goto nomem;
        cap = t->cap;
        if (!grow((void **)&t->end, &cap, need, sizeof *t->end)) goto nomem;
        for (int k = 0; k < t->nstr; k++) {
            cap = t->cap;
            if (!grow((void **)&t->str[k].codes, &cap, need, sizeof(int32_t))) goto nomem;
        }
        t->cap = cap;
    }
    t->start[t->rows] = s;
    t->end[t->rows] = en;
    for (int k = 0; k < t->nstr; k++) {
        int32_t code = intern(&t->str[k], fs[2 + k], fn[2 + k]);
        if (code < 0) goto nomem;
        t->str[k].codes[t->rows] = code;
    }
    t->rows++;
    return p;
nomem:
    t->status = CC_NOMEM;
    snprintf(t->reason, sizeof t->reason, "out of memory");
    return NULL;
}

table_t *cc_scan(int fd, int ncols, int col_start, int col_end, const int *str_cols, int nstr) {
    if (!cls['\n']) init_classes();
    table_t *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->ncols = ncols; t->nstr = nstr;
    t->line = 1;
    if (nstr < 1 || nstr > MAX_STR || ncols < 1) { fallback(t, "unsupported columns"); return t; }
    t->slot = malloc((size_t)ncols);
    if (!t->slot) { t->status = CC_NOMEM; return t; }
    memset(t->slot, 0xff, (size_t)ncols);
    for (int k = 0; k < nstr; k++) t->str[k].last = -1;
    int cols[2 + MAX_STR] = {col_start, col_end};
    for (int k = 0; k < nstr; k++) cols[2 + k] = str_cols[k];
    for (int k = 0; k < 2 + nstr; k++) {
        if (cols[k] < 0 || cols[k] >= ncols || t->slot[cols[k]] >= 0) { fallback(t, "unsupported columns"); return t; }
        t->slot[cols[k]] = (signed char)k;
    }
    size_t cap = 8u << 20, have = 0;
    char *buf = malloc(cap + 16); /* an LF and room for reading a word past it */
    if (!buf) { t->status = CC_NOMEM; return t; }
    int eof = 0, header = 1;
    while (t->status == CC_OK) {
        if (!eof) {
            if (have == cap) {
                char *b = realloc(buf, cap * 2 + 16);
                if (!b) { t->status = CC_NOMEM; break; }
                buf = b; cap *= 2;
            }
            ssize_t n = read(fd, buf + have, cap - have);
            if (n < 0) {
                if (errno == EINTR) continue;
                t->status = CC_IOERROR;
                snprintf(t->reason, sizeof t->reason, "read: %s", strerror(errno));
                break;
            }
            if (n == 0) eof = 1;
            have += (size_t)n;
        }
        if (header && have >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0) { fallback(t, "a byte order mark"); break; }
        /* whole lines in buf[0..have): each ends with an LF, which stops every scanning loop */
        const char *p = buf, *limit;
        if (eof && have && buf[have - 1] != '\n') buf[have++] = '\n'; /* the last line's end */
        const char *last = have ? memrchr(buf, '\n', have) : NULL;
        limit = last ? last + 1 : buf;
        while (p < limit) {
            if (*p == '\n' && !header) { /* a blank line: the csv module's reader skips it (Table.rows) */
                p++;
                t->line++;
                continue;
            }
            p = read_line(t, p, header);
            if (!p) break;
            header = 0;
            t->line++;
        }
        if (t->status != CC_OK) break;
        have -= (size_t)(limit - buf);
        memmove(buf, limit, have);
        if (eof) break;
    }
    free(buf);
    if (t->status == CC_OK && header) fallback(t, "no header");
    if (t->status == CC_OK && t->rows == 0) fallback(t, "no data rows");
    for (int k = 0; t->status == CC_OK && k < nstr; k++)
        if (!utf8_valid((const unsigned char *)t->str[k].text, t->str[k].text_len)) fallback(t, "text not in UTF-8");
    return t;
}

int cc_status(table_t *t) { return t->status; }
const char *cc_reason(table_t *t) { return t->reason; }
int64_t cc_rows(table_t *t) { return t->rows; }

static void release_schema(struct ArrowSchema *s) { s->release = NULL; }

typedef struct { void *buffers[3]; const void *pointers[3]; struct ArrowArray dict; } owned_t;

static void release_array(struct ArrowArray *a) {
    owned_t *o = a->private_data;
    if (o) {
        if (o->dict.release) o->dict.release(&o->dict);
        for (int i = 0; i < 3; i++) free(o->buffers[i]);
        free(o);
    }
    a->private_data = NULL;
    a->release = NULL;
}

static void release_dict(struct ArrowArray *a) {
    owned_t *o = a->private_data;
    if (o) { for (int i = 0; i < 3; i++) free(o->buffers[i]); free(o); }
    a->private_data = NULL;
    a->release = NULL;
}

/* Column `which` into the caller's structs: 0 start, 1 end (int64), 2 + k the k-th string column (dictionary).
   The array takes the buffers (a second export of the same column fails). Returns 0, or -1. */
int cc_export(table_t *t, int which, struct ArrowSchema *schema, struct ArrowArray *array) {
    if (t->status != CC_OK || which < 0 || which >= 2 + t->nstr) return -1;
    owned_t *o = calloc(1, sizeof *o);
    if (!o) return -1;
    if (t->cap > t->rows) { /* hand over only what is used: the table lives as long as the report */
        int64_t n = t->rows;
        void *p;
        if ((p = realloc(t->start, (size_t)n * sizeof *t->start))) t->start = p;
        if ((p = realloc(t->end, (size_t)n * sizeof *t->end))) t->end = p;
        for (int k = 0; k < t->nstr; k++)
            if ((p = realloc(t->str[k].codes, (size_t)n * sizeof(int32_t)))) t->str[k].codes = p;
        t->cap = n;
    }
    memset(schema, 0, sizeof *schema);
    memset(array, 0, sizeof *array);
    schema->release = release_schema;
    array->length = t->rows;
    array->n_buffers = 2;
    array->buffers = o->pointers;
    array->private_data = o;
    array->release = release_array;
    if (which < 2) {
        int64_t **col = which == 0 ? &t->start : &t->end;
        if (!*col) { free(o); return -1; }
        schema->format = "l";
        o->buffers[1] = *col;
        *col = NULL;
    } else {
        column_t *c = &t->str[which - 2];
        if (!c->codes) { free(o); return -1; }
        owned_t *d = calloc(1, sizeof *d);
        if (!d) { free(o); return -1; }
        t->dict_schema.format = "U";
        t->dict_schema.release = release_schema;
        schema->format = "i";
        schema->dictionary = &t->dict_schema;
        o->buffers[1] = c->codes;
        c->codes = NULL;
        d->buffers[1] = c->offsets; d->buffers[2] = c->text;
        d->pointers[1] = c->offsets; d->pointers[2] = c->text;
        c->offsets = NULL; c->text = NULL;
        o->dict.length = c->count;
        o->dict.n_buffers = 3;
        o->dict.buffers = d->pointers;
        o->dict.private_data = d;
        o->dict.release = release_dict;
        array->dictionary = &o->dict;
    }
    o->pointers[1] = o->buffers[1];
    return 0;
}

void cc_free(table_t *t) {
    if (!t) return;
    free(t->start);
    free(t->end);
    free(t->slot);
    for (int k = 0; k < MAX_STR; k++) {
        column_t *c = &t->str[k];
        free(c->text); free(c->offsets); free(c->slots); free(c->hashes); free(c->codes);
    }
    free(t);
}
