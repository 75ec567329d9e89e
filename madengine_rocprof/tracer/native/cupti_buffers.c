/* CUPTI activity buffers handled in C, for the CUPTI backend (cupti_backend.NativeBuffers).
 *
 * CUPTI asks for an empty buffer on the thread whose records filled the last one (per-thread buffers: often the
 * app's launching thread) and hands a full one back on its own worker thread. Python callbacks there would take the
 * GIL from a host-bound main thread and allocate or copy 32 MiB while holding it. Here neither callback enters
 * Python: a request pops a buffer from a free list (pages touched in advance by cupti_buffers_prefill), a completion
 * queues the buffer with its valid size (or, in discard mode, puts it straight back: the do-nothing consumer that
 * benchmarks/tracer uses to measure CUPTI's own cost). Python takes the queued buffers when a window closes,
 * copies their bytes and gives them back (cupti_buffers_take, cupti_buffers_release).
 *
 * One mutex guards the two lists; it is held for a few pointer moves only, never across an allocation. Buffers are
 * never freed while the process lives (a completed buffer may still be read by Python).
 * Python registers the two callbacks with cuptiActivityRegisterCallbacks through ctypes, so this file needs neither
 * CUDA's nor CUPTI's headers or libraries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CUPTI_BUFFERS_VERSION 1
#define ALIGN 64 /* CUPTI needs 8 */

typedef struct {
    uint8_t *ptr;
    size_t valid;
} done_entry;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static size_t buffer_size = 32u << 20;
static int keep = 1;
static uint8_t **free_list;
static size_t n_free, cap_free;
static done_entry *done;
static size_t n_done, cap_done;
static uint64_t requested, allocated, completed_bytes, completed_count, failed;

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

/* A new buffer with every page touched now, so CUPTI's writes into it fault no page in on a launch. */
static uint8_t *new_buffer(void) {
    void *p = NULL;
    if (posix_memalign(&p, ALIGN, buffer_size) != 0)
        return NULL;
    memset(p, 0, buffer_size);
    __atomic_add_fetch(&allocated, 1, __ATOMIC_RELAXED);
    return p;
}

int cupti_buffers_version(void) { return CUPTI_BUFFERS_VERSION; }

/* Set before the callbacks are registered: buffer size in bytes; keep=0 discards every completed buffer. The size
 * cannot change once a buffer exists (buffers carry no size of their own): -1 then, 0 when set. */
int cupti_buffers_configure(size_t size, int keep_records) {
    int status = 0;
    pthread_mutex_lock(&mu);
    if (size != buffer_size && __atomic_load_n(&allocated, __ATOMIC_RELAXED) > 0)
        status = -1;
    else
        buffer_size = size;
    keep = keep_records;
    pthread_mutex_unlock(&mu);
    return status;
}

/* Allocates buffers until `count` are free (outside the traced steps); returns how many are free, -1 if out of memory. */
long cupti_buffers_prefill(size_t count) {
    for (;;) {
        pthread_mutex_lock(&mu);
        size_t have = n_free;
        pthread_mutex_unlock(&mu);
        if (have >= count)
            return (long)have;
        uint8_t *p = new_buffer();
        if (!p)
            return -1;
        pthread_mutex_lock(&mu);
        int bad = grow((void **)&free_list, &cap_free, sizeof *free_list, n_free + 1);
        if (!bad)
            free_list[n_free++] = p;
        pthread_mutex_unlock(&mu);
        if (bad) {
            free(p);
            return -1;
        }
    }
}

/* CUpti_BuffersCallbackRequestFunc */
void cupti_buffers_request(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *p = NULL;
    pthread_mutex_lock(&mu);
    requested++;
    if (n_free)
        p = free_list[--n_free];
    size_t sz = buffer_size;
    pthread_mutex_unlock(&mu);
    if (!p)
        p = new_buffer();
    if (!p)
        __atomic_add_fetch(&failed, 1, __ATOMIC_RELAXED); /* CUPTI drops records it has no buffer for, and counts them */
    *buffer = p;
    *size = p ? sz : 0;
    *max_records = 0; /* as many as fit */
}

/* CUpti_BuffersCallbackCompleteFunc */
void cupti_buffers_complete(void *context, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid) {
    (void)context;
    (void)stream_id;
    (void)size;
    if (!buffer)
        return;
    pthread_mutex_lock(&mu);
    completed_count++;
    completed_bytes += valid;
    if (keep && valid && grow((void **)&done, &cap_done, sizeof *done, n_done + 1) == 0) {
        done[n_done].ptr = buffer;
        done[n_done].valid = valid;
        n_done++;
    } else if (grow((void **)&free_list, &cap_free, sizeof *free_list, n_free + 1) == 0) {
        free_list[n_free++] = buffer;
    }
    pthread_mutex_unlock(&mu);
}

size_t cupti_buffers_pending(void) {
    pthread_mutex_lock(&mu);
    size_t n = n_done;
    pthread_mutex_unlock(&mu);
    return n;
}

/* Moves up to `max` completed buffers (oldest first) into ptrs/valids; the caller copies them, then releases each. */
size_t cupti_buffers_take(uint8_t **ptrs, size_t *valids, size_t max) {
    pthread_mutex_lock(&mu);
    size_t n = n_done < max ? n_done : max;
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = done[i].ptr;
        valids[i] = done[i].valid;
    }
    memmove(done, done + n, (n_done - n) * sizeof *done);
    n_done -= n;
    pthread_mutex_unlock(&mu);
    return n;
}

void cupti_buffers_release(uint8_t *buffer) {
    pthread_mutex_lock(&mu);
    if (grow((void **)&free_list, &cap_free, sizeof *free_list, n_free + 1) == 0)
        free_list[n_free++] = buffer;
    pthread_mutex_unlock(&mu);
}

/* requested, allocated, completed buffers, completed bytes, failed requests */
void cupti_buffers_counts(uint64_t out[5]) {
    pthread_mutex_lock(&mu);
    out[0] = requested;
    out[1] = __atomic_load_n(&allocated, __ATOMIC_RELAXED);
    out[2] = completed_count;
    out[3] = completed_bytes;
    out[4] = __atomic_load_n(&failed, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&mu);
}
