/* Native records of CUDA API calls for the CUPTI backend: the libcudart interposer (the default API recorder;
 * x86-64 Linux).
 *
 * While a window is open, the GOT slots through which the loaded libraries call libcudart's cuda* functions point at
 * stubs here. A stub takes a time-stamp-counter read, calls the real function with the caller's arguments, takes a
 * second read and writes one 32-byte record. No CUPTI callback runs for these calls, which is what made CUPTI's API
 * records and callbacks dear on eager PyTorch (benchmarks/wrapper/README.md, 0d; benchmarks/tracer/README.md).
 * Closing the window writes the original slots back.
 * Correlation ids: a CUPTI callback on the driver's launch, copy and set calls (api_recorder_launch_callback) leaves
 * the id CUPTI gives the GPU work in the thread's state, and the stub of the runtime call around it takes it, so a
 * kernel joins the runtime call that launched it; a driver call outside any is recorded itself.
 *
 * Records go into per-thread chunks of 65,536: no lock, no system call, no allocation except one chunk per 65,536
 * calls of a thread. A writer publishes a record by storing the chunk's end pointer after the record (a release
 * store); the one reader (Python, after the window is closed) copies what is published. Chunks form a list pushed
 * at its head with compare-and-swap; the reader frees full chunks it has copied, never the head.
 *
 * Clock: the CPU's time-stamp counter where it is invariant (rdtsc on x86-64, cntvct_el0 on AArch64), else
 * CLOCK_MONOTONIC (kept for tests; the interposer refuses to run without an invariant TSC). Python maps ticks to CUPTI's timestamps with a
 * line through calibration pairs (api_recorder_pair) taken at the start and the end of a window.
 *
 * Python drives everything through ctypes, so this file needs neither CUDA's nor CUPTI's headers or libraries.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define API_RECORDER_VERSION 2
#define CHUNK_RECORDS 65536u
#define MAX_FUNCS 1024  /* distinct cuda* functions the interposer can stub; torch 2.11's libraries have 165 slots */
#define DOMAIN_INTERPOSED 3  /* api_record.domain of an interposed runtime call */
#define STRING(x) #x
#define VALUE_OF(x) STRING(x)

typedef struct {
    uint64_t start;        /* ticks at the API call's entry */
    uint64_t end;          /* ticks at its exit */
    uint32_t correlation;  /* CUPTI's correlation id: the one the call's kernel/memcpy/memset records carry; 0: none */
    uint32_t cbid;         /* CUPTI callback id, or for the interposer the function's index (api_recorder_function) */
    uint32_t thread;       /* OS thread id (gettid), like rocprofv3's Thread_Id */
    uint32_t domain;       /* CUpti_CallbackDomain: 1 driver API, 2 runtime API; 3 runtime API, interposed */
} api_record;

typedef struct chunk {
    api_record *_Atomic published;  /* one past the last record written: what the reader may copy */
    struct chunk *next;
    api_record *taken;              /* one past the last record copied by the reader */
    api_record rec[CHUNK_RECORDS];
} chunk;

/* One per thread that made a recorded call. The assembly below reads the fields by offset (checked below). */
typedef struct {
    uint64_t depth;          /* interposed calls open on this thread */
    api_record *next;        /* where the next record goes */
    api_record *limit;       /* end of the current chunk */
    chunk *current;
    uint64_t correlation;    /* left by api_recorder_launch_callback for the runtime call around it */
    uint32_t thread;
} thread_state;

_Static_assert(sizeof(api_record) == 32, "api_record is 32 bytes");
_Static_assert(offsetof(chunk, published) == 0, "the exit stub publishes at offset 0");
_Static_assert(offsetof(thread_state, next) == 8 && offsetof(thread_state, limit) == 16 &&
               offsetof(thread_state, current) == 24 && offsetof(thread_state, correlation) == 32 &&
               offsetof(thread_state, thread) == 40,
               "the stubs' field offsets");

static _Atomic(chunk *) chunks;
static _Atomic uint64_t lost;  /* records not written: no memory for a chunk */
static _Atomic uint64_t chunk_count;
static int use_tsc = 1;
__attribute__((visibility("hidden"))) int api_recorder_on;  /* a window is open; 0: the stubs pass straight through */

/* Initial-exec TLS: one %fs-relative load in the stubs, no __tls_get_addr call. */
__attribute__((visibility("hidden"), tls_model("initial-exec"))) __thread thread_state *api_recorder_state;

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

/* This thread's state, made on its first record (NULL only when there is no memory). Called by the entry stub. */
__attribute__((visibility("hidden"))) thread_state *api_recorder_thread_state(void) {
    thread_state *s = api_recorder_state;
    if (s == NULL) {
        s = calloc(1, sizeof(thread_state));
        if (s == NULL) return NULL;
        s->thread = (uint32_t)syscall(SYS_gettid);
        api_recorder_state = s;
    }
    return s;
}

/* Gives the thread a fresh chunk; 0 when there is no memory (the record is counted as lost). Called by the exit
 * stub when the current chunk is full. */
__attribute__((visibility("hidden"))) int api_recorder_new_chunk(thread_state *s) {
    chunk *c = malloc(sizeof(chunk));
    if (c == NULL) {
        atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
        return 0;
    }
    atomic_init(&c->published, c->rec);
    c->taken = c->rec;
    c->next = atomic_load_explicit(&chunks, memory_order_relaxed);
    while (!atomic_compare_exchange_weak_explicit(&chunks, &c->next, c, memory_order_release, memory_order_relaxed)) {
    }
    atomic_fetch_add_explicit(&chunk_count, 1, memory_order_relaxed);
    s->current = c;
    s->next = c->rec;
    s->limit = c->rec + CHUNK_RECORDS;
    return 1;
}

static void put(thread_state *s, uint64_t start, uint64_t end, uint32_t correlation, uint32_t cbid, uint32_t domain) {
    if (s->next >= s->limit && !api_recorder_new_chunk(s)) return;
    api_record *r = s->next;
    r->start = start;
    r->end = end;
    r->correlation = correlation;
    r->cbid = cbid;
    r->thread = s->thread;
    r->domain = domain;
    s->next = r + 1;
    atomic_store_explicit(&s->current->published, r + 1, memory_order_release);
}

/* The fields of CUPTI's CUpti_CallbackData these callbacks read, in the order and types of cupti_callbacks.h. */
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

/* CUPTI callback of the interposer, enabled for the driver's launch, copy and set calls only. Inside an interposed
 * runtime call it hands that call the correlation id of the GPU work. Outside one (a library that links the CUDA
 * runtime statically, like cuBLAS, or calls the driver itself) it records the driver call, so that every kernel,
 * copy and set still joins the host call that issued it. */
void api_recorder_launch_callback(void *userdata, int32_t domain, uint32_t cbid, const callback_data *data) {
    (void)userdata;
    thread_state *s = api_recorder_state;
    if (s != NULL && s->depth > 0) {
        if (data->site == 0) s->correlation = data->correlation_id;
        return;
    }
    int on = __atomic_load_n(&api_recorder_on, __ATOMIC_RELAXED);
    if (data->site == 0) {
        *data->correlation_data = on ? ticks() : 0;  /* 0: the call began outside a window */
        return;
    }
    uint64_t start = *data->correlation_data, end = ticks();
    if (!on || start == 0 || start > end) return;  /* a call that straddles a window's opening is not recorded */
    if (s == NULL && (s = api_recorder_thread_state()) == NULL) {
        atomic_fetch_add_explicit(&lost, 1, memory_order_relaxed);
        return;
    }
    put(s, start, end, data->correlation_id, cbid, (uint32_t)domain);
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
        n += (size_t)(atomic_load_explicit(&c->published, memory_order_acquire) - c->taken);
    return n;
}

/* Copies up to `max` published records into `out` (in no particular order: the caller sorts by time) and frees
 * the full chunks it has copied out, except the list's head. Returns how many were copied. */
size_t api_recorder_take(api_record *out, size_t max) {
    size_t n = 0;
    chunk *prev = NULL;
    chunk *c = atomic_load_explicit(&chunks, memory_order_acquire);
    while (c != NULL && n < max) {
        api_record *published = atomic_load_explicit(&c->published, memory_order_acquire);
        size_t count = (size_t)(published - c->taken);
        if (count > max - n) count = max - n;
        memcpy(out + n, c->taken, count * sizeof(api_record));
        c->taken += count;
        n += count;
        chunk *next = c->next;
        if (prev != NULL && c->taken == c->rec + CHUNK_RECORDS) {  /* full and copied: no writer holds it */
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

/* ------------------------------------------------------------------------------------------------------------------
 * The libcudart interposer (x86-64 Linux).
 */
#if defined(__x86_64__) && defined(__linux__)

__attribute__((visibility("hidden"))) void *api_recorder_real[MAX_FUNCS];  /* the real function of each stub */
static char *function_names[MAX_FUNCS];
static uint32_t function_count;

typedef struct {
    void **slot;
    void *original;
    int relro;  /* the slot's page is read-only outside our writes */
} patch;

static patch *patches;
static size_t patch_count, patch_capacity;
static uint64_t foreign_slots;         /* slots that held neither libcudart's function nor a lazy-binding stub */
static unsigned long long seen_loads;  /* the loader's count of objects loaded, at the last scan */
static pthread_mutex_t patch_lock = PTHREAD_MUTEX_INITIALIZER;

long api_recorder_restore(void);
static int count_loads(struct dl_phdr_info *info, size_t size, void *arg);

/* MAX_FUNCS entry stubs of 16 bytes each (stub k loads k into r10 and jumps to the common body). The body makes a
 * frame (with CFI, so debuggers and unwinders walk through it), copies the 128 bytes above the caller's return
 * address (the stack arguments; cudaMemset3D, with two structures by value, passes 56 bytes there) into the place
 * the real function expects them, calls it, and records the call. A real call and return keep the CPU's return-address
 * prediction in step: per call it measured 15-24 ns cheaper than swapping the return address (README 0e).
 * Registers: at entry the arguments are live in rdi, rsi, rdx, rcx, r8, r9 and xmm0-7; rax (the vector-argument
 * count of variadic calls: libcudart has none), r10, r11 and xmm8-15 are free. After the call the result is live
 * in rax, rdx, xmm0 and xmm1, and every other caller-saved register is free. The stack is 16-byte aligned at every
 * call. */
__asm__(
    ".pushsection .text\n"
    ".p2align 4\n"
    ".globl api_recorder_stubs\n"
    ".hidden api_recorder_stubs\n"
    "api_recorder_stubs:\n"
    ".set api_recorder_k, 0\n"
    ".rept 1024\n"
    ".p2align 4\n"
    "  movl $api_recorder_k, %r10d\n"
    "  jmp api_recorder_enter\n"
    ".set api_recorder_k, api_recorder_k + 1\n"
    ".endr\n"

    ".p2align 4\n"
    "api_recorder_enter:\n"
    ".cfi_startproc\n"
    "  cmpl $0, api_recorder_on(%rip)\n"
    "  jne 1f\n"
    "9:\n"                                  /* no window, or no memory: straight to the real function */
    "  leaq api_recorder_real(%rip), %rax\n"
    "  jmpq *(%rax,%r10,8)\n"
    "1:\n"
    "  pushq %rbp\n"
    ".cfi_def_cfa_offset 16\n"
    ".cfi_offset %rbp, -16\n"
    "  movq %rsp, %rbp\n"
    ".cfi_def_cfa_register %rbp\n"
    "  subq $144, %rsp\n"                   /* the copied stack arguments (128 bytes), then start and index */
    "  movq %r10, -8(%rbp)\n"
    "  movq api_recorder_state@gottpoff(%rip), %r11\n"
    "  movq %fs:(%r11), %r11\n"
    "  testq %r11, %r11\n"
    "  jz 8f\n"
    "4:\n"
    "  incq (%r11)\n"                       /* depth: the launch callback looks at it */
    "  movdqu 16(%rbp), %xmm8\n"            /* the caller's stack arguments, for the real function's frame */
    "  movdqu 32(%rbp), %xmm9\n"
    "  movdqu 48(%rbp), %xmm10\n"
    "  movdqu 64(%rbp), %xmm11\n"
    "  movdqu 80(%rbp), %xmm12\n"
    "  movdqu 96(%rbp), %xmm13\n"
    "  movdqu 112(%rbp), %xmm14\n"
    "  movdqu 128(%rbp), %xmm15\n"
    "  movdqu %xmm8, 0(%rsp)\n"
    "  movdqu %xmm9, 16(%rsp)\n"
    "  movdqu %xmm10, 32(%rsp)\n"
    "  movdqu %xmm11, 48(%rsp)\n"
    "  movdqu %xmm12, 64(%rsp)\n"
    "  movdqu %xmm13, 80(%rsp)\n"
    "  movdqu %xmm14, 96(%rsp)\n"
    "  movdqu %xmm15, 112(%rsp)\n"
    "  movq %rdx, %r11\n"                   /* rdtsc writes edx:eax; rdx is the third argument */
    "  rdtsc\n"
    "  shlq $32, %rdx\n"
    "  orq %rax, %rdx\n"
    "  movq %rdx, -16(%rbp)\n"              /* start */
    "  movq %r11, %rdx\n"
    "  leaq api_recorder_real(%rip), %rax\n"
    "  callq *(%rax,%r10,8)\n"
    "  movq %rax, %r8\n"                    /* the result */
    "  movq %rdx, %r9\n"
    "  rdtsc\n"
    "  shlq $32, %rdx\n"
    "  orq %rdx, %rax\n"                    /* end */
    "  movq api_recorder_state@gottpoff(%rip), %r11\n"
    "  movq %fs:(%r11), %r11\n"
    "  decq (%r11)\n"
    "  movq 8(%r11), %rsi\n"                /* next */
    "  cmpq 16(%r11), %rsi\n"               /* limit */
    "  jae 7f\n"
    "2:\n"
    "  movq -16(%rbp), %rdi\n"
    "  movq %rdi, 0(%rsi)\n"                /* start */
    "  movq %rax, 8(%rsi)\n"                /* end */
    "  movl 32(%r11), %edi\n"
    "  movl %edi, 16(%rsi)\n"               /* correlation */
    "  movl -8(%rbp), %edi\n"
    "  movl %edi, 20(%rsi)\n"               /* function index */
    "  movl 40(%r11), %edi\n"
    "  movl %edi, 24(%rsi)\n"               /* thread */
    "  movl $" VALUE_OF(DOMAIN_INTERPOSED) ", 28(%rsi)\n"
    "  addq $32, %rsi\n"
    "  movq %rsi, 8(%r11)\n"
    "  movq 24(%r11), %rdi\n"
    "  movq %rsi, (%rdi)\n"                 /* publish (x86-64: a plain store is a release store) */
    "3:\n"
    "  movq $0, 32(%r11)\n"                 /* the correlation id belongs to this call only */
    "  movq %r8, %rax\n"
    "  movq %r9, %rdx\n"
    ".cfi_remember_state\n"
    "  leave\n"
    ".cfi_def_cfa %rsp, 8\n"
    "  ret\n"
    ".cfi_restore_state\n"
    "7:\n"                                  /* no chunk yet, or a full one */
    "  subq $64, %rsp\n"
    "  movq %rax, 0(%rsp)\n"
    "  movq %r8, 8(%rsp)\n"
    "  movq %r9, 16(%rsp)\n"
    "  movq %r11, 24(%rsp)\n"
    "  movdqu %xmm0, 32(%rsp)\n"
    "  movdqu %xmm1, 48(%rsp)\n"
    "  movq %r11, %rdi\n"
    "  call api_recorder_new_chunk\n"
    "  movl %eax, %r10d\n"
    "  movq 0(%rsp), %rax\n"
    "  movq 8(%rsp), %r8\n"
    "  movq 16(%rsp), %r9\n"
    "  movq 24(%rsp), %r11\n"
    "  movdqu 32(%rsp), %xmm0\n"
    "  movdqu 48(%rsp), %xmm1\n"
    "  addq $64, %rsp\n"
    "  testl %r10d, %r10d\n"
    "  jz 3b\n"
    "  movq 8(%r11), %rsi\n"
    "  jmp 2b\n"
    "8:\n"                                  /* the thread's first recorded call: make its state */
    "  subq $176, %rsp\n"
    "  movq %rdi, 0(%rsp)\n"
    "  movq %rsi, 8(%rsp)\n"
    "  movq %rdx, 16(%rsp)\n"
    "  movq %rcx, 24(%rsp)\n"
    "  movq %r8, 32(%rsp)\n"
    "  movq %r9, 40(%rsp)\n"
    "  movdqu %xmm0, 48(%rsp)\n"
    "  movdqu %xmm1, 64(%rsp)\n"
    "  movdqu %xmm2, 80(%rsp)\n"
    "  movdqu %xmm3, 96(%rsp)\n"
    "  movdqu %xmm4, 112(%rsp)\n"
    "  movdqu %xmm5, 128(%rsp)\n"
    "  movdqu %xmm6, 144(%rsp)\n"
    "  movdqu %xmm7, 160(%rsp)\n"
    "  call api_recorder_thread_state\n"
    "  movq %rax, %r11\n"
    "  movq 0(%rsp), %rdi\n"
    "  movq 8(%rsp), %rsi\n"
    "  movq 16(%rsp), %rdx\n"
    "  movq 24(%rsp), %rcx\n"
    "  movq 32(%rsp), %r8\n"
    "  movq 40(%rsp), %r9\n"
    "  movdqu 48(%rsp), %xmm0\n"
    "  movdqu 64(%rsp), %xmm1\n"
    "  movdqu 80(%rsp), %xmm2\n"
    "  movdqu 96(%rsp), %xmm3\n"
    "  movdqu 112(%rsp), %xmm4\n"
    "  movdqu 128(%rsp), %xmm5\n"
    "  movdqu 144(%rsp), %xmm6\n"
    "  movdqu 160(%rsp), %xmm7\n"
    "  addq $176, %rsp\n"
    "  movq -8(%rbp), %r10\n"
    "  testq %r11, %r11\n"
    "  jnz 4b\n"
    "  leave\n"
    "  jmp 9b\n"
    ".cfi_endproc\n"
    ".popsection\n");

extern char api_recorder_stubs[];

static void *stub(uint32_t k) { return api_recorder_stubs + 16 * (size_t)k; }

/* The index of a function by name, adding it (with its real address) when new; -1 when the table is full. */
static int function_index(const char *name, void *real) {
    for (uint32_t k = 0; k < function_count; k++)
        if (strcmp(function_names[k], name) == 0) return (int)k;
    if (function_count == MAX_FUNCS) return -1;
    char *copy = strdup(name);
    if (copy == NULL) return -1;
    function_names[function_count] = copy;
    api_recorder_real[function_count] = real;
    return (int)function_count++;
}

static int remember(void **slot, void *original, int relro) {
    if (patch_count == patch_capacity) {
        size_t wanted = patch_capacity ? 2 * patch_capacity : 1024;
        patch *bigger = realloc(patches, wanted * sizeof(patch));
        if (bigger == NULL) return -1;
        patches = bigger;
        patch_capacity = wanted;
    }
    patches[patch_count++] = (patch){slot, original, relro};
    return 0;
}

/* Writes a GOT slot, making its page writable for the write when the object's RELRO segment made it read-only. */
static int write_slot(void **slot, void *value, int relro) {
    if (!relro) {
        __atomic_store_n(slot, value, __ATOMIC_RELEASE);
        return 0;
    }
    uintptr_t at = (uintptr_t)slot, page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    void *page = (void *)(at & ~(page_size - 1));
    if (mprotect(page, page_size, PROT_READ | PROT_WRITE) != 0) return -1;
    __atomic_store_n(slot, value, __ATOMIC_RELEASE);
    mprotect(page, page_size, PROT_READ);
    return 0;
}

typedef struct {
    void *cudart;          /* dlopen handle of the loaded libcudart */
    const char *cudart_name;
    long patched;
    int failed;
} scan;

static uintptr_t dynamic_address(ElfW(Addr) base, ElfW(Addr) value) {
    return value < base ? base + value : value;  /* glibc relocates most d_ptr entries in place; the vDSO does not */
}

/* For one loaded object: points every JUMP_SLOT/GLOB_DAT relocation of an undefined cuda* symbol at its stub. */
static int patch_object(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    scan *sc = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (strcmp(name, sc->cudart_name) == 0 || strstr(name, "linux-vdso") || strstr(name, "/ld-linux")) return 0;
    ElfW(Addr) base = info->dlpi_addr;
    const ElfW(Dyn) *dyn = NULL;
    uintptr_t relro_start = 0, relro_end = 0, lo = UINTPTR_MAX, hi = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)(base + ph->p_vaddr);
        if (ph->p_type == PT_GNU_RELRO) {
            relro_start = (base + ph->p_vaddr) & ~(uintptr_t)4095;
            relro_end = base + ph->p_vaddr + ph->p_memsz;
        }
        if (ph->p_type == PT_LOAD) {
            if (base + ph->p_vaddr < lo) lo = base + ph->p_vaddr;
            if (base + ph->p_vaddr + ph->p_memsz > hi) hi = base + ph->p_vaddr + ph->p_memsz;
        }
    }
    if (dyn == NULL) return 0;
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *tables[2] = {NULL, NULL};
    size_t sizes[2] = {0, 0};
    for (const ElfW(Dyn) *d = dyn; d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
            case DT_SYMTAB: symtab = (const ElfW(Sym) *)dynamic_address(base, d->d_un.d_ptr); break;
            case DT_STRTAB: strtab = (const char *)dynamic_address(base, d->d_un.d_ptr); break;
            case DT_JMPREL: tables[0] = (const ElfW(Rela) *)dynamic_address(base, d->d_un.d_ptr); break;
            case DT_PLTRELSZ: sizes[0] = d->d_un.d_val; break;
            case DT_RELA: tables[1] = (const ElfW(Rela) *)dynamic_address(base, d->d_un.d_ptr); break;
            case DT_RELASZ: sizes[1] = d->d_un.d_val; break;
            default: break;
        }
    }
    if (symtab == NULL || strtab == NULL) return 0;
    for (int t = 0; t < 2; t++) {
        if (tables[t] == NULL) continue;
        size_t n = sizes[t] / sizeof(ElfW(Rela));
        for (size_t i = 0; i < n; i++) {
            const ElfW(Rela) *r = &tables[t][i];
            uint32_t type = ELF64_R_TYPE(r->r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            const ElfW(Sym) *sym = &symtab[ELF64_R_SYM(r->r_info)];
            const char *sym_name = strtab + sym->st_name;
            /* the public API, and the entry nvcc's launch stubs call (__cudaLaunchKernel: CUPTI's cudaLaunchKernel);
             * not the other __cuda* internals (module registration, call configuration), which CUPTI does not show */
            if (sym->st_shndx != SHN_UNDEF) continue;
            if (strncmp(sym_name, "cuda", 4) != 0 && strncmp(sym_name, "__cudaLaunch", 12) != 0) continue;
            if (ELF64_ST_TYPE(sym->st_info) != STT_FUNC && ELF64_ST_TYPE(sym->st_info) != STT_NOTYPE) continue;
            void *real = dlsym(sc->cudart, sym_name);
            if (real == NULL) continue;
            int k = function_index(sym_name, real);
            if (k < 0) continue;
            void **slot = (void **)(base + r->r_offset);
            void *now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
            if (now == stub((uint32_t)k)) continue;  /* patched already */
            int lazy = (uintptr_t)now >= lo && (uintptr_t)now < hi;  /* the object's own PLT, not yet bound */
            if (now != real && !lazy) {
                foreign_slots++;
                continue;
            }
            int relro = (uintptr_t)slot >= relro_start && (uintptr_t)slot < relro_end;
            if (remember(slot, now, relro) != 0 || write_slot(slot, stub((uint32_t)k), relro) != 0) {
                sc->failed = 1;
                return 1;
            }
            sc->patched++;
        }
    }
    return 0;
}

typedef struct {
    const char *wanted;
    char found[4096];
} find;

static int find_cudart(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    find *f = arg;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    if (strncmp(base, f->wanted, strlen(f->wanted)) == 0 && strlen(name) < sizeof(f->found)) {
        strcpy(f->found, name);
        return 1;
    }
    return 0;
}

/* Opens a window: points the loaded libraries' calls into libcudart at the stubs. `wanted` is the start of
 * libcudart's file name ("libcudart.so"). Returns the number of GOT slots patched, -1 when no such library is
 * loaded, -2 when a slot could not be written (every slot written so far is put back). */
long api_recorder_interpose(const char *wanted) {
    pthread_mutex_lock(&patch_lock);
    find f = {wanted, {0}};
    dl_iterate_phdr(find_cudart, &f);
    void *cudart = f.found[0] ? dlopen(f.found, RTLD_NOLOAD | RTLD_LAZY) : NULL;
    if (cudart == NULL) {
        pthread_mutex_unlock(&patch_lock);
        return -1;
    }
    scan sc = {cudart, f.found, 0, 0};
    __atomic_store_n(&api_recorder_on, 1, __ATOMIC_RELEASE);
    dl_iterate_phdr(count_loads, &seen_loads);
    dl_iterate_phdr(patch_object, &sc);
    dlclose(cudart);  /* the library stays loaded: the process holds it */
    pthread_mutex_unlock(&patch_lock);
    if (sc.failed) {
        api_recorder_restore();
        return -2;
    }
    return sc.patched;
}

/* Closes the window: writes every patched slot back (unless something else has rewritten it since) and stops the
 * stubs recording. Returns the number of slots written back. */
long api_recorder_restore(void) {
    pthread_mutex_lock(&patch_lock);
    __atomic_store_n(&api_recorder_on, 0, __ATOMIC_RELEASE);
    long restored = 0;
    for (size_t i = patch_count; i-- > 0;) {
        void **slot = patches[i].slot;
        void *now = __atomic_load_n(slot, __ATOMIC_ACQUIRE);
        if ((char *)now < api_recorder_stubs || (char *)now >= api_recorder_stubs + 16 * MAX_FUNCS) continue;
        if (write_slot(slot, patches[i].original, patches[i].relro) == 0) restored++;
    }
    patch_count = 0;
    pthread_mutex_unlock(&patch_lock);
    return restored;
}

static int count_loads(struct dl_phdr_info *info, size_t size, void *arg) {
    *(unsigned long long *)arg = size >= offsetof(struct dl_phdr_info, dlpi_subs) ? info->dlpi_adds : 0;
    return 1;
}

/* While a window is open: patches the libraries loaded since it opened (a lazily loaded library calls libcudart
 * through its own GOT). Cheap when nothing was loaded: one look at the loader's count. Returns slots patched. */
long api_recorder_refresh(const char *wanted) {
    unsigned long long loads = 0;
    dl_iterate_phdr(count_loads, &loads);
    if (!__atomic_load_n(&api_recorder_on, __ATOMIC_ACQUIRE) || (loads != 0 && loads == seen_loads)) return 0;
    return api_recorder_interpose(wanted);
}

const char *api_recorder_function(uint32_t k) { return k < function_count ? function_names[k] : NULL; }

uint32_t api_recorder_function_count(void) { return function_count; }

uint64_t api_recorder_foreign_slots(void) { return foreign_slots; }

int api_recorder_can_interpose(void) { return 1; }

#else

long api_recorder_interpose(const char *wanted) { (void)wanted; return -3; }
long api_recorder_restore(void) { return 0; }
long api_recorder_refresh(const char *wanted) { (void)wanted; return 0; }
const char *api_recorder_function(uint32_t k) { (void)k; return NULL; }
uint32_t api_recorder_function_count(void) { return 0; }
uint64_t api_recorder_foreign_slots(void) { return 0; }
int api_recorder_can_interpose(void) { return 0; }

#endif
