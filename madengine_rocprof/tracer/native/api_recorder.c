/* Records of CUDA API calls, written by a CUPTI callback in native code: the CUPTI backend's opt-in API recorder
 * (MADENGINE_ROCPROF_TRACER_API_RECORDER=callbacks; CUPTI's activity records are the default, because CUPTI's
 * callback dispatch itself measured dearer than they are on eager PyTorch: benchmarks/wrapper/README.md, 0d).
 * The callback takes two clock reads and writes one 32-byte record into a per-thread chunk: no lock, no system
 * call, no allocation except one chunk per 65,536 calls of a thread. Python subscribes it to CUPTI (cuptiSubscribe + cuptiEnableDomain through ctypes), so this
 * file needs neither CUPTI's headers nor its library to build.
 *
 * Clock: the CPU's time-stamp counter where it is invariant (rdtsc on x86-64, cntvct_el0 on AArch64), else
 * CLOCK_MONOTONIC. Python maps ticks to CUPTI's timestamps with a line through calibration pairs
 * (api_recorder_pair) taken at the start and the end of a window.
 *
 * Threads: each thread writes only its own current chunk and publishes a record by a release store of the chunk's
 * count; the one reader (Python, after the domain is switched off) copies what is published. Chunks form a list
 * pushed at its head with compare-and-swap; the reader frees full chunks it has copied, never the head.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define API_RECORDER_VERSION 1
#define CHUNK_RECORDS 65536u

typedef struct {
    uint64_t start;        /* ticks at the API call's entry */
    uint64_t end;          /* ticks at its exit */
    uint32_t correlation;  /* CUPTI's correlation id: the one the call's kernel/memcpy/memset records carry */
    uint32_t cbid;         /* CUPTI callback id: which function (runtime or driver domain) */
    uint32_t thread;       /* OS thread id (gettid), like rocprofv3's Thread_Id */
    uint32_t domain;       /* CUpti_CallbackDomain: 1 driver API, 2 runtime API */
} api_record;

typedef struct chunk {
    struct chunk *next;
    _Atomic uint32_t used;  /* records published by the writing thread */
    uint32_t taken;         /* records copied by the reader */
    api_record rec[CHUNK_RECORDS];
} chunk;

/* The fields of CUPTI's CUpti_CallbackData this callback reads, in the order and types of cupti_callbacks.h. */
typedef struct {
    int32_t site;  /* CUpti_ApiCallbackSite: 0 entry, 1 exit */
    const char *function_name;
    const void *function_params;
    void *function_return_value;
    const char *symbol_name;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;  /* 64 bits CUPTI keeps for us from a call's entry to its exit */
    uint32_t correlation_id;
} callback_data;

static _Atomic(chunk *) chunks;
static _Atomic uint64_t lost;     /* records not written: no memory for a chunk */
static _Atomic uint64_t chunk_count;
static int use_tsc = 1;
static __thread chunk *current;
static __thread uint32_t thread_id;

static inline uint64_t ticks(void) {
    if (use_tsc) {
#if defined(__x86_64__)
        return __builtin_ia32_rdtsc();
#elif defined(__aarch64__)
        uint64_t value;
        __asm__ volatile("mrs %0, cntvct_el0" : "=r"(value));
        return value;
#endif
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static chunk *new_chunk(void) {
    chunk *c = malloc(sizeof(chunk));
    if (c == NULL) return NULL;
    atomic_init(&c->used, 0);
    c->taken = 0;
    c->next = atomic_load_explicit(&chunks, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&chunks, &c->next, c, memory_order_release, memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&chunk_count, 1, memory_order_relaxed);
    return c;
}

/* The CUPTI callback (CUpti_CallbackFunc) for the driver and runtime API domains. */
void api_recorder_callback(void *userdata, int32_t domain, uint32_t cbid, const callback_data *data) {
    (void)userdata;
    if (data->site == 0) {
        *data->correlation_data = ticks();
        return;
    }
    uint64_t end = ticks();
    chunk *c = current;
    if (c == NULL) {
        c = current = new_chunk();
        if (c == NULL) {
            atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
            return;
        }
        if (thread_id == 0) thread_id = (uint32_t)syscall(SYS_gettid);
    }
    uint32_t i = atomic_load_explicit(&c->used, memory_order_relaxed);
    api_record *r = &c->rec[i];
    r->start = *data->correlation_data;
    r->end = end;
    r->correlation = data->correlation_id;
    r->cbid = cbid;
    r->thread = thread_id;
    r->domain = (uint32_t)domain;
    if (i + 1 == CHUNK_RECORDS) current = NULL;  /* before publishing: the reader may free a full chunk */
    atomic_store_explicit(&c->used, i + 1, memory_order_release);
}

int api_recorder_version(void) { return API_RECORDER_VERSION; }

size_t api_recorder_record_size(void) { return sizeof(api_record); }

/* 1: time-stamp counter (Python checks that it is invariant), 0: CLOCK_MONOTONIC nanoseconds. */
void api_recorder_use_tsc(int on) { use_tsc = on; }

uint64_t api_recorder_ticks(void) { return ticks(); }

/* A (ticks, CUPTI timestamp) pair: the tightest of `tries` reads of cuptiGetTimestamp between two tick reads. */
int api_recorder_pair(int (*get_timestamp)(uint64_t *), int tries, uint64_t *tick_out, uint64_t *ns_out) {
    uint64_t best = UINT64_MAX;
    for (int k = 0; k < tries; k++) {
        uint64_t ns = 0, t0 = ticks();
        int status = get_timestamp(&ns);
        uint64_t t1 = ticks();
        if (status != 0) return status;
        if (t1 - t0 < best) {
            best = t1 - t0;
            *tick_out = t0 + (t1 - t0) / 2;
            *ns_out = ns;
        }
    }
    return 0;
}

/* Records published and not yet copied, over every thread. */
size_t api_recorder_pending(void) {
    size_t n = 0;
    for (chunk *c = atomic_load_explicit(&chunks, memory_order_acquire); c != NULL; c = c->next)
        n += atomic_load_explicit(&c->used, memory_order_acquire) - c->taken;
    return n;
}

/* Copies up to `max` published records into `out` (in no particular order: the caller sorts by time) and frees
 * the full chunks it has copied out, except the list's head. Returns how many were copied. */
size_t api_recorder_take(api_record *out, size_t max) {
    size_t n = 0;
    chunk *prev = NULL;
    chunk *c = atomic_load_explicit(&chunks, memory_order_acquire);
    while (c != NULL && n < max) {
        uint32_t used = atomic_load_explicit(&c->used, memory_order_acquire);
        uint32_t count = used - c->taken;
        if (count > max - n) count = (uint32_t)(max - n);
        memcpy(out + n, c->rec + c->taken, (size_t)count * sizeof(api_record));
        c->taken += count;
        n += count;
        chunk *next = c->next;
        if (prev != NULL && c->taken == CHUNK_RECORDS) {  /* full and copied: no writer holds it */
            prev->next = next;
            free(c);
            atomic_fetch_sub_explicit(&chunk_count, 1, memory_order_relaxed);
        } else {
            prev = c;
        }
        c = next;
    }
    return n;
}

uint64_t api_recorder_lost(void) { return atomic_load_explicit(&lost, memory_order_relaxed); }

uint64_t api_recorder_chunks(void) { return atomic_load_explicit(&chunk_count, memory_order_relaxed); }
