/* cuptiActivityGetNextRecord for the fake CUPTI's buffers (fakes/fake_cupti.py), in C: what the benchmark of the
 * CUPTI trace writer (benchmarks/tracer/bench_write.py cupti) walks buffers with, at a C function's cost like
 * libcupti's. Record sizes are the fake's (_DTYPES itemsize, OTHER_KINDS); 12 = CUPTI_ERROR_MAX_LIMIT_REACHED. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static size_t record_size(int32_t kind) {
    switch (kind) {
    case 1: return 96;              /* memcpy6 */
    case 2: return 88;              /* memset4 */
    case 4: case 5: return 40;      /* driver, runtime API */
    case 10: return 216;            /* kernel10 */
    case 3: return 48;              /* OTHER_KINDS */
    case 6: return 64;
    default: return 0;
    }
}

int fake_next_record(const uint8_t *base, size_t valid, const uint8_t **record) {
    const uint8_t *next = base;
    if (*record) {
        int32_t kind;
        memcpy(&kind, *record, 4);
        size_t size = record_size(kind);
        if (!size)
            return 1; /* CUPTI_ERROR_INVALID_PARAMETER */
        next = *record + size;
    }
    if (next >= base + valid)
        return 12;
    *record = next;
    return 0;
}
