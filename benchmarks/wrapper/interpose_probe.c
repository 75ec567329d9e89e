/* Measurement probe, not part of the product: what recording CUDA runtime calls costs when libcudart's entry points
 * are interposed (LD_PRELOAD) instead of going through CUPTI. It wraps the two calls eager PyTorch makes most around
 * every kernel (cudaGetDevice, about 9 per kernel in TinyTransformer v1 B8 S128, and cudaGetLastError, about 1):
 * two time-stamp counter reads and one 24-byte record per call into a per-thread buffer, as an API recorder would.
 * overhead_alternating.py (variant cupti_interpose_probe) preloads it and switches it on around traced blocks. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t start, end; uint32_t id, pad; } record;
#define CAPACITY (1u << 22)

static __thread record *buffer;
static __thread uint32_t used;
static _Atomic int recording;
static _Atomic uint64_t recorded;
static int (*real_get_device)(int *);
static int (*real_get_last_error)(void);

static int find_cudart(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcudart.so")) {
        *(void **)out = dlopen(info->dlpi_name, RTLD_NOLOAD | RTLD_LAZY);
        return 1;
    }
    return 0;
}

static void *real(const char *name) {
    void *f = dlsym(RTLD_NEXT, name);
    if (f == NULL) {
        void *cudart = NULL;
        dl_iterate_phdr(find_cudart, &cudart);
        if (cudart) f = dlsym(cudart, name);
    }
    if (f == NULL) abort();
    return f;
}

static inline void put(uint32_t id, uint64_t start) {
    uint64_t end = __builtin_ia32_rdtsc();
    if (buffer == NULL) buffer = malloc(CAPACITY * sizeof(record));
    if (buffer == NULL) return;
    record *r = &buffer[used++ & (CAPACITY - 1)];
    r->start = start;
    r->end = end;
    r->id = id;
    atomic_fetch_add_explicit(&recorded, 1, memory_order_relaxed);
}

int cudaGetDevice(int *device) {
    if (real_get_device == NULL) real_get_device = (int (*)(int *))real("cudaGetDevice");
    if (!atomic_load_explicit(&recording, memory_order_relaxed)) return real_get_device(device);
    uint64_t start = __builtin_ia32_rdtsc();
    int status = real_get_device(device);
    put(1, start);
    return status;
}

int cudaGetLastError(void) {
    if (real_get_last_error == NULL) real_get_last_error = (int (*)(void))real("cudaGetLastError");
    if (!atomic_load_explicit(&recording, memory_order_relaxed)) return real_get_last_error();
    uint64_t start = __builtin_ia32_rdtsc();
    int status = real_get_last_error();
    put(2, start);
    return status;
}

void probe_recording(int on) { atomic_store(&recording, on); }

uint64_t probe_recorded(void) { return atomic_load(&recorded); }
