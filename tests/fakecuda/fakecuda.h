/* SPDX-License-Identifier: MIT */
/*
 * Internals of the simulated CUDA driver (tests/fakecuda): shared by its source files, never
 * installed, never seen by ffm. ffm relies on the *shape* of libcuda.so.1 (exported names,
 * frame-pointer prologues, one internal wait function under every synchronizing call, complete
 * .eh_frame) and on its timing and data behaviour; README.md lists what that means and what
 * is not simulated.
 *
 * Object model:
 *   fk_ctx     a context: its streams, a futex word bumped on every completed GPU operation,
 *              the copy engines (one per direction, as on a real GPU) and the CPU wait mode.
 *   fk_stream  an in-order queue of operations, executed by its own engine thread, so work on
 *              different streams overlaps in time as on a GPU.
 *   fk_op      one queued operation (kernel, copy, memset, event record, event wait); it may
 *              depend on points of other streams (legacy default stream semantics,
 *              cuStreamWaitEvent), which it waits for before it starts.
 *   fk_point   "stream S has completed its op number SEQ": everything that waits (host or
 *              engine) waits for a set of points, a fence.
 *
 * Locking: a context's lock protects its stream list and each stream's `submitted` counter, so
 * that the dependencies of an op are computed atomically with its submission. A stream's
 * queue lock protects its queue only. Completion is published with atomics and a futex wake.
 */
#ifndef FAKECUDA_H
#define FAKECUDA_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * The API functions cuda.h declares are the library's exports: default visibility for them,
 * hidden (-fvisibility=hidden) for everything else. __CUDA_API_VERSION_INTERNAL (set by the
 * build, as NVIDIA's own driver build does) makes cuda.h declare every versioned name the real
 * driver exports: the legacy ones (cuMemcpyHtoD), the _v2 ones and the _ptds/_ptsz ones.
 */
#pragma GCC visibility push(default)
#include <cuda.h>
#pragma GCC visibility pop

/*
 * For the wait function and its helpers: never inlined, never cloned under another name
 * (GCC's .isra/.constprop clones; clang keeps names), so they exist once, at one address.
 */
#ifdef __clang__
#define FK_NOINLINE __attribute__((noinline))
#else
#define FK_NOINLINE __attribute__((noipa))
#endif

/* Everything not marked otherwise stays inside the library (the version script agrees). */
#define FK_HIDDEN __attribute__((visibility("hidden")))

/* Reported by cuDriverGetVersion and used as the API version of contexts. */
#define FK_DRIVER_VERSION 13000
#define FK_DEVICE_NAME "ffm simulated GPU"
#define FK_DEVICE_COUNT 1
#define FK_DEVICE_MEM (80ULL << 30)

/* Handle types, checked by the handle registry before a handle is dereferenced. */
enum fk_type {
	FK_T_CTX = 1,
	FK_T_STREAM,
	FK_T_EVENT,
	FK_T_MODULE,
	FK_T_FUNCTION, /* a CUfunction, and a CUkernel: cuLaunchKernel takes either */
	FK_T_LIBRARY,  /* a CUlibrary: a module loaded by cuLibraryLoadData */
};

/* Knobs read from the environment at cuInit (README.md documents them). */
struct fk_config {
	uint64_t copy_lat_ns;	 /* FAKECUDA_COPY_LAT_US: fixed cost of every copy/memset */
	double copy_bytes_per_ns; /* FAKECUDA_COPY_GBPS: host<->device bandwidth */
	double dtod_bytes_per_ns; /* FAKECUDA_DTOD_GBPS: device-local copies and memsets */
	uint64_t launch_lat_ns;	 /* FAKECUDA_LAUNCH_LAT_US: GPU-side start cost of a kernel */
	uint64_t spin_ns;	 /* FAKECUDA_ENGINE_SPIN_US: engine spins (not sleeps) this close
				    to an op's end, for precise completion times */
	double pageable_bytes_per_ns; /* FAKECUDA_PAGEABLE_GBPS: copies from/to pageable memory */
	/* FAKECUDA_EXIT_{SPIN,YIELD,BLOCK}_US: how long after the GPU finished a wait returns;
	 * FAKECUDA_EXIT_LONG_US more for yield/blocking waits of FAKECUDA_EXIT_LONG_AFTER_US+ */
	uint64_t exit_ns[3], exit_long_ns, exit_long_after_ns;
	/* FAKECUDA_MIGRATE_PAGE_US: a device op on managed pages the host touched last, per page;
	 * FAKECUDA_FAULT_PAGE_US: the host's fault on a managed page the device wrote last */
	uint64_t migrate_page_ns, fault_page_ns;
	/* FAKECUDA_ALLOC_US: host time of each device allocation, plus FAKECUDA_ALLOC_MIB_US per
	 * MiB of it; FAKECUDA_FREE_US: host time of each free, outside its implicit wait (each
	 * at least: the simulation's own mapping and unmapping are inside them) */
	uint64_t alloc_ns, alloc_mib_ns, free_ns;
};
extern struct fk_config fk_config FK_HIDDEN;

struct fk_stream;
struct fk_event;
struct fk_function;

struct fk_point {
	struct fk_stream *s; /* holds a reference while the point is stored anywhere */
	uint64_t seq;
};

/* A set of points to wait for; small fixed capacity covers every context we simulate. */
#define FK_FENCE_MAX 64
struct fk_fence {
	int n;
	bool blocking; /* force the blocking mode (events with CU_EVENT_BLOCKING_SYNC) */
	struct fk_point pt[FK_FENCE_MAX];
};

struct fk_ctx {
	_Atomic int refs; /* the handle's, and one per stream */
	uint64_t id;	  /* unique for the process's life: pointers get reused, ids do not */
	pthread_mutex_t lock;
	CUdevice dev;
	bool primary;
	_Atomic unsigned int flags; /* CU_CTX_*; the SCHED bits are read at each wait */
	/* Futex word: incremented (and waiters woken) whenever any op of this context completes. */
	_Atomic uint32_t done_gen;
	struct fk_stream *legacy; /* stream 0 */
	struct fk_stream **streams;
	int nstreams, cap_streams;
	/* One copy engine per direction: copies in the same direction serialize, like on a GPU. */
	pthread_mutex_t copy_engine[2];
};

struct fk_stream {
	_Atomic int refs;
	struct fk_ctx *ctx;
	unsigned int flags; /* CU_STREAM_* */
	int priority;
	bool legacy;	 /* the context's legacy default stream */
	bool per_thread; /* a thread's per-thread default stream */
	bool dead;	 /* destroyed by the user; the thread exits when the queue drains */
	uint64_t submitted;	      /* under ctx->lock */
	_Atomic uint64_t completed;   /* ops complete in order, so one counter says it all */
	_Atomic uint64_t last_end_ns; /* CLOCK_MONOTONIC time the last op completed */
	pthread_mutex_t qlock;
	pthread_cond_t qcond;
	struct fk_op *head, *tail;
	pthread_t thread;
};

struct fk_event {
	_Atomic int refs;
	struct fk_ctx *ctx;
	unsigned int flags; /* CU_EVENT_* */
	pthread_mutex_t lock;
	struct fk_point pt; /* last record; pt.s == NULL: never recorded */
	uint64_t gen;	    /* bumped by each record, so a stale record does not set the time */
	uint64_t time_ns;   /* completion time of the record with generation `gen` */
	bool timed;
};

/* A kernel the simulator knows, as declared in a module's PTX. */
#define FK_MAX_PARAMS 8
struct fk_function {
	const char *name;     /* the entry's name in the PTX (as cuModuleGetFunction asks) */
	int kind;	      /* which simulated kernel */
	int nparams;
	unsigned int psize[FK_MAX_PARAMS]; /* bytes of each parameter */
	struct fk_module *mod;
};
struct fk_module {
	int nfuncs;
	struct fk_function *funcs;
	char *names; /* storage of the entry names */
};
enum fk_op_type {
	FK_OP_KERNEL,
	FK_OP_COPY,
	FK_OP_MEMSET,
	FK_OP_EVENT,
	FK_OP_NOP, /* only waits for its dependencies (cuStreamWaitEvent) */
};

enum fk_dir { FK_HTOD, FK_DTOH, FK_DTOD, FK_HTOH };

struct fk_op {
	struct fk_op *next;
	enum fk_op_type type;
	uint64_t seq;
	int ndeps;
	struct fk_point deps[FK_FENCE_MAX];
	union {
		struct {
			struct fk_function fn; /* a copy: the module may be unloaded meanwhile */
			uint64_t args[FK_MAX_PARAMS]; /* argument values captured at launch */
		} kernel;
		struct {
			enum fk_dir dir;
			void *dst;
			const void *src;
			size_t bytes;
			void *staging; /* owned copy of pageable source bytes, freed after */
			bool pageable; /* the host side is pageable: FAKECUDA_PAGEABLE_GBPS */
		} copy;
		struct {
			void *dst;
			uint32_t value;
			unsigned int elem; /* 1, 2 or 4 bytes */
			size_t count;
		} memset;
		struct {
			struct fk_event *ev; /* holds a reference */
			uint64_t gen;
		} event;
	};
};

/* ---- handles.c: which pointers are live handles of which type ---- */
int fk_handle_add(const void *p, enum fk_type type) FK_HIDDEN;
void fk_handle_del(const void *p) FK_HIDDEN;
bool fk_handle_is(const void *p, enum fk_type type) FK_HIDDEN;

/* ---- memory.c: the allocation table (device memory is host memory at the same address) ---- */
enum fk_mem_kind {
	FK_MEM_PAGEABLE = 0, /* not known to the driver */
	FK_MEM_DEVICE,	     /* cuMemAlloc */
	FK_MEM_PINNED,	     /* cuMemAllocHost / cuMemHostAlloc */
	FK_MEM_REGISTERED,   /* cuMemHostRegister: pinned, not owned */
	FK_MEM_MANAGED,	     /* cuMemAllocManaged */
};
struct fk_alloc {
	uintptr_t base;
	size_t size;	/* as asked */
	size_t mapped;	/* as mapped (page multiple); 0: not ours to unmap */
	enum fk_mem_kind kind;
	unsigned int flags;
	struct fk_ctx *ctx;
};
CUresult fk_mem_alloc(struct fk_ctx *ctx, size_t size, enum fk_mem_kind kind, unsigned int flags,
		      bool low32, void **ret) FK_HIDDEN;
CUresult fk_mem_register(struct fk_ctx *ctx, void *p, size_t size, unsigned int flags) FK_HIDDEN;
/* Removes the allocation starting at base if its kind is in kinds_mask (1 << kind). */
CUresult fk_mem_release(uintptr_t base, unsigned int kinds_mask) FK_HIDDEN;
/* Kind of [p, p+len): the kind of the allocation containing all of it, else FK_MEM_PAGEABLE. */
enum fk_mem_kind fk_mem_kind_of(const void *p, size_t len, struct fk_alloc *out) FK_HIDDEN;

/* migrate.c: managed pages' migration (FAKECUDA_MIGRATE_PAGE_US, FAKECUDA_FAULT_PAGE_US). */
bool fk_mig_enabled(void) FK_HIDDEN;
int fk_mig_add(void *p, size_t mapped) FK_HIDDEN;
void fk_mig_remove(uintptr_t base) FK_HIDDEN;
/* A device operation is about to use [p, p+n): the migration time it pays (ns). */
uint64_t fk_mig_device_use(const void *p, size_t n) FK_HIDDEN;
void fk_mig_device_done(const void *p, size_t n) FK_HIDDEN;
bool fk_mem_lookup(uintptr_t addr, struct fk_alloc *out) FK_HIDDEN;
void fk_mem_usage(size_t *device_bytes) FK_HIDDEN;
/* Is [p, p+len) inside one allocation the GPU can access (device, managed, pinned)? */
static inline bool fk_mem_gpu_ok(uintptr_t p, size_t len)
{
	return len && fk_mem_kind_of((const void *)p, len, NULL) != FK_MEM_PAGEABLE;
}

/* ---- kernels.c: the kernels the simulator knows, found by name in PTX ---- */
CUresult fk_module_load_ptx(const void *image, struct fk_module **ret) FK_HIDDEN;
void fk_module_free(struct fk_module *m) FK_HIDDEN;
struct fk_function *fk_module_find(struct fk_module *m, const char *name) FK_HIDDEN;
/* Refuses a launch whose pointer arguments the simulated GPU could not touch. */
CUresult fk_kernel_check(const struct fk_function *fn, const uint64_t *args) FK_HIDDEN;
/* Executes a kernel on the engine thread; returns when it is done, at `start_ns` + its time. */
void fk_kernel_run(const struct fk_function *fn, const uint64_t *args, uint64_t start_ns) FK_HIDDEN;

/* ---- engine.c ---- */
uint64_t fk_now_ns(void) FK_HIDDEN;
/* Sleeps (then spins the last fk_config.spin_ns) until CLOCK_MONOTONIC reaches t. */
void fk_engine_sleep_until(uint64_t t) FK_HIDDEN;
/* FAKECUDA_ALLOC_LOG: one allocation's ("alloc") or free's ("free") own time. */
void fk_alloc_log(const char *what, size_t bytes, uint64_t ns) FK_HIDDEN;
void fk_config_load(void) FK_HIDDEN;
/* False if a FAKECUDA_* variable was malformed (cuInit then fails). */
bool fk_config_valid(void) FK_HIDDEN;

CUresult fk_ctx_new(CUdevice dev, unsigned int flags, bool primary, struct fk_ctx **ret) FK_HIDDEN;
/* Waits (through the wait function) for all work, then frees the context. */
CUresult fk_ctx_destroy(struct fk_ctx *ctx) FK_HIDDEN;

CUresult fk_stream_new(struct fk_ctx *ctx, unsigned int flags, int priority, bool legacy,
		       bool per_thread, struct fk_stream **ret) FK_HIDDEN;
/* Marks the stream dead; its resources go when its work is done (cuStreamDestroy semantics). */
void fk_stream_retire(struct fk_stream *s) FK_HIDDEN;
struct fk_stream *fk_stream_get(struct fk_stream *s) FK_HIDDEN;
void fk_stream_put(struct fk_stream *s) FK_HIDDEN;

struct fk_op *fk_op_new(enum fk_op_type type) FK_HIDDEN;
void fk_op_free(struct fk_op *op) FK_HIDDEN;
/*
 * Queues op on s after computing its dependencies (legacy default stream semantics plus the
 * points already in op->deps); on success the point of its completion is stored in *done
 * (with a reference) when done != NULL. Takes ownership of op in every case.
 */
CUresult fk_submit(struct fk_stream *s, struct fk_op *op, struct fk_point *done) FK_HIDDEN;

void fk_point_put(struct fk_point *pt) FK_HIDDEN;
static inline bool fk_point_done(const struct fk_point *pt)
{
	return !pt->s || atomic_load_explicit(&pt->s->completed, memory_order_acquire) >= pt->seq;
}
/* Points of all work submitted so far to the context (for context-wide synchronization). */
void fk_ctx_fence(struct fk_ctx *ctx, struct fk_fence *f) FK_HIDDEN;
void fk_fence_release(struct fk_fence *f) FK_HIDDEN;

/*
 * The one place where the host waits for the simulated GPU. Every synchronizing API call ends
 * up here; nothing else may call the wait function (see engine.c).
 */
CUresult fk_host_sync(struct fk_ctx *ctx, struct fk_fence *f) FK_HIDDEN;

void fk_event_put(struct fk_event *ev) FK_HIDDEN;

#endif /* FAKECUDA_H */
