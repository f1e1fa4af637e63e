/* SPDX-License-Identifier: MIT */
/*
 * The simulated GPU: contexts, streams with one engine thread each, the submission rules of
 * the legacy default stream, and the host side of waiting, which goes through one internal
 * function, fake_wait(), as every synchronization of the real libcuda goes through one
 * internal function (docs/DESIGN.md, "Facts measured on the real GPU machine").
 *
 * Time is real time: an engine thread that executes a 20 ms kernel sleeps until 20 ms after
 * the kernel started, because ffm measures wall-clock time.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

struct fk_config fk_config = {
	.copy_lat_ns = 8000,
	.copy_bytes_per_ns = 12.0,
	.dtod_bytes_per_ns = 12.0,
	.launch_lat_ns = 0,
	.spin_ns = 50000,
};

/*
 * Futex word shared by everything that waits for GPU work: bumped, with a wake-up of all
 * waiters, whenever any operation of any context completes. One word for all contexts keeps
 * cross-context waits (cuStreamWaitEvent on another context's event) simple; a simulator has
 * few waiters.
 */
static _Atomic uint32_t fk_done_gen;

/* How often the host waited: kept so the call into the mode helper is never the last thing
 * fake_wait does (no tail call may hide fake_wait's frame during a wait). */
static _Atomic uint64_t fk_nwaits;

uint64_t fk_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

static inline void cpu_relax(void)
{
	__builtin_ia32_pause();
}

static void futex_wait(_Atomic uint32_t *word, uint32_t val)
{
	/* EAGAIN (value changed) and EINTR both just mean "look again". */
	syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *word)
{
	syscall(SYS_futex, word, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

void fk_engine_sleep_until(uint64_t t)
{
	uint64_t now = fk_now_ns();

	if (t > now + fk_config.spin_ns) {
		uint64_t wake = t - fk_config.spin_ns;
		struct timespec ts = { .tv_sec = wake / 1000000000ULL, .tv_nsec = wake % 1000000000ULL };

		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
			;
	}
	while (fk_now_ns() < t)
		cpu_relax();
}

/* ---- configuration ---- */

/* Parses a non-negative decimal number; returns false (and leaves *out) if malformed. */
static bool env_number(const char *name, double *out)
{
	const char *s = getenv(name);
	char *end;
	double v;

	if (!s || !*s)
		return true;
	errno = 0;
	v = strtod(s, &end);
	if (errno || *end || v < 0 || v != v)
		return false;
	*out = v;
	return true;
}

static bool config_ok = true;

void fk_config_load(void)
{
	double lat_us = 8, gbps = 12, dtod_gbps = -1, launch_us = 0, spin_us = 50;
	double pageable_gbps = -1, exit_us[3] = { 0, 0, 0 }, long_us = 0, long_after_us = 1000;
	double migrate_us = 0, fault_us = 0, alloc_us = 0, alloc_mib_us = 0, free_us = 0;
	bool ok = true;

	ok &= env_number("FAKECUDA_COPY_LAT_US", &lat_us);
	ok &= env_number("FAKECUDA_COPY_GBPS", &gbps);
	ok &= env_number("FAKECUDA_DTOD_GBPS", &dtod_gbps);
	ok &= env_number("FAKECUDA_LAUNCH_LAT_US", &launch_us);
	ok &= env_number("FAKECUDA_ENGINE_SPIN_US", &spin_us);
	ok &= env_number("FAKECUDA_PAGEABLE_GBPS", &pageable_gbps);
	ok &= env_number("FAKECUDA_EXIT_SPIN_US", &exit_us[0]);
	ok &= env_number("FAKECUDA_EXIT_YIELD_US", &exit_us[1]);
	ok &= env_number("FAKECUDA_EXIT_BLOCK_US", &exit_us[2]);
	ok &= env_number("FAKECUDA_EXIT_LONG_US", &long_us);
	ok &= env_number("FAKECUDA_EXIT_LONG_AFTER_US", &long_after_us);
	ok &= env_number("FAKECUDA_MIGRATE_PAGE_US", &migrate_us);
	ok &= env_number("FAKECUDA_FAULT_PAGE_US", &fault_us);
	ok &= env_number("FAKECUDA_ALLOC_US", &alloc_us);
	ok &= env_number("FAKECUDA_ALLOC_MIB_US", &alloc_mib_us);
	ok &= env_number("FAKECUDA_FREE_US", &free_us);
	/* A bandwidth of 0 would make every copy infinite. */
	if (gbps <= 0 || dtod_gbps == 0 || pageable_gbps == 0)
		ok = false;
	config_ok = ok;
	if (!ok)
		return;
	fk_config.copy_lat_ns = (uint64_t)(lat_us * 1000.0);
	/* 1 GB/s (10^9 bytes per second) is one byte per nanosecond. */
	fk_config.copy_bytes_per_ns = gbps;
	fk_config.dtod_bytes_per_ns = dtod_gbps > 0 ? dtod_gbps : gbps;
	fk_config.launch_lat_ns = (uint64_t)(launch_us * 1000.0);
	fk_config.spin_ns = (uint64_t)(spin_us * 1000.0);
	fk_config.pageable_bytes_per_ns = pageable_gbps > 0 ? pageable_gbps : gbps;
	for (int i = 0; i < 3; i++)
		fk_config.exit_ns[i] = (uint64_t)(exit_us[i] * 1000.0);
	fk_config.exit_long_ns = (uint64_t)(long_us * 1000.0);
	fk_config.exit_long_after_ns = (uint64_t)(long_after_us * 1000.0);
	fk_config.migrate_page_ns = (uint64_t)(migrate_us * 1000.0);
	fk_config.fault_page_ns = (uint64_t)(fault_us * 1000.0);
	fk_config.alloc_ns = (uint64_t)(alloc_us * 1000.0);
	fk_config.alloc_mib_ns = (uint64_t)(alloc_mib_us * 1000.0);
	fk_config.free_ns = (uint64_t)(free_us * 1000.0);
}

bool fk_config_valid(void)
{
	return config_ok;
}

/* ---- points and fences ---- */

void fk_point_put(struct fk_point *pt)
{
	if (pt->s)
		fk_stream_put(pt->s);
	pt->s = NULL;
	pt->seq = 0;
}

void fk_fence_release(struct fk_fence *f)
{
	for (int i = 0; i < f->n; i++)
		fk_point_put(&f->pt[i]);
	f->n = 0;
}

static bool fence_done(const struct fk_fence *f)
{
	for (int i = 0; i < f->n; i++)
		if (!fk_point_done(&f->pt[i]))
			return false;
	return true;
}

/* Adds (s, up to its last submitted op) unless that is already complete. Under ctx->lock. */
static void add_point_locked(struct fk_point *pts, int *n, struct fk_stream *s)
{
	if (s->submitted <= atomic_load_explicit(&s->completed, memory_order_acquire))
		return;
	if (*n >= FK_FENCE_MAX)
		abort(); /* impossible: streams per context are capped below FK_FENCE_MAX */
	pts[*n].s = fk_stream_get(s);
	pts[*n].seq = s->submitted;
	(*n)++;
}

void fk_ctx_fence(struct fk_ctx *ctx, struct fk_fence *f)
{
	f->n = 0;
	f->blocking = false;
	pthread_mutex_lock(&ctx->lock);
	for (int i = 0; i < ctx->nstreams; i++)
		add_point_locked(f->pt, &f->n, ctx->streams[i]);
	pthread_mutex_unlock(&ctx->lock);
}

/* ---- the wait function and its per-mode helpers ----
 *
 * Each helper loops until the fence is complete. They are separate, never-inlined functions so
 * that a stack sampled during a wait is helper <- fake_wait <- ... <- cuXxx: the innermost
 * libcuda function common to all waiting stacks is fake_wait, as in the real driver, and ffm's
 * calibration has to find it the same way. FK_NOINLINE also keeps them under their own
 * names (no .isra/.constprop clones).
 */
static FK_NOINLINE CUresult fake_wait_spin(const struct fk_fence *f)
{
	/* CU_CTX_SCHED_SPIN: the thread stays runnable, polling the GPU's progress. */
	while (!fence_done(f))
		cpu_relax();
	return CUDA_SUCCESS;
}

static FK_NOINLINE CUresult fake_wait_yield(const struct fk_fence *f)
{
	/* CU_CTX_SCHED_YIELD: poll, but give the CPU away between polls. */
	while (!fence_done(f))
		sched_yield();
	return CUDA_SUCCESS;
}

static FK_NOINLINE CUresult fake_wait_block(const struct fk_fence *f)
{
	/* CU_CTX_SCHED_BLOCKING_SYNC: sleep in the kernel (futex) until an op completes. */
	for (;;) {
		uint32_t gen = atomic_load_explicit(&fk_done_gen, memory_order_acquire);

		if (fence_done(f))
			return CUDA_SUCCESS;
		futex_wait(&fk_done_gen, gen);
	}
}

/*
 * The exit latency the knobs plant: a wait that had to wait returns this long after the GPU
 * finished, longer for a long yield or blocking wait (as a driver that stops polling wakes
 * later). Spent inside fake_wait, where the real driver spends it.
 */
static FK_NOINLINE void wait_exit(int mode, uint64_t waited_ns)
{
	uint64_t extra = fk_config.exit_ns[mode];

	if (mode && waited_ns >= fk_config.exit_long_after_ns)
		extra += fk_config.exit_long_ns;
	if (extra)
		fk_engine_sleep_until(fk_now_ns() + extra);
}

/*
 * THE wait function. Every synchronizing path of the API calls it exactly once per call, even
 * when there is nothing left to wait for (a sync call on an idle GPU is still a sync point);
 * engine threads never call it, so probes on it count host waits only.
 */
static FK_NOINLINE CUresult fake_wait(struct fk_ctx *ctx, struct fk_fence *f)
{
	unsigned int sched = atomic_load(&ctx->flags) & CU_CTX_SCHED_MASK;
	uint64_t t0 = fk_now_ns();
	bool waited = !fence_done(f);
	int mode;
	CUresult r;

	if (f->blocking || (sched & CU_CTX_SCHED_BLOCKING_SYNC))
		r = fake_wait_block(f), mode = 2;
	else if (sched & CU_CTX_SCHED_YIELD)
		r = fake_wait_yield(f), mode = 1;
	else /* CU_CTX_SCHED_SPIN, and CU_CTX_SCHED_AUTO with fewer contexts than CPUs */
		r = fake_wait_spin(f), mode = 0;
	if (waited)
		wait_exit(mode, fk_now_ns() - t0);
	atomic_fetch_add_explicit(&fk_nwaits, 1, memory_order_relaxed);
	return r;
}

/*
 * Ground-truth logs, one line appended per event to the file an environment variable names:
 * for tests that check what a tracer measured: on a loaded machine a call lasts longer than
 * the simulation says, and only the truth tells a tracer's error from the scheduler's. Opened
 * at the first event; -1 once it cannot be (no log, no error).
 */
struct truth_log {
	const char *env;
	int fd;
	pthread_mutex_t lock;
};

static void truth_log(struct truth_log *l, const char *line, size_t n)
{
	pthread_mutex_lock(&l->lock);
	if (l->fd == -2) {
		const char *path = getenv(l->env);

		l->fd = path && *path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644) : -1;
	}
	if (l->fd >= 0 && write(l->fd, line, n) != (ssize_t)n)
		l->fd = -1; /* a short log would lie: stop it */
	pthread_mutex_unlock(&l->lock);
}

/*
 * FAKECUDA_WAIT_LOG=FILE: each host wait's duration, measured around the call of fake_wait,
 * as a decimal count of nanoseconds per line, in the order the waits ended.
 */
static struct truth_log wait_log_file = { "FAKECUDA_WAIT_LOG", -2, PTHREAD_MUTEX_INITIALIZER };

static void wait_log(uint64_t ns)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%llu\n", (unsigned long long)ns);

	truth_log(&wait_log_file, line, (size_t)n);
}

/*
 * FAKECUDA_ALLOC_LOG=FILE: each device allocation's and free's own time (a free's after its
 * wait), a line "alloc|free PID COMM TID BYTES NS" each: what FAKECUDA_ALLOC_US and
 * FAKECUDA_FREE_US planted, as the calls really took it.
 */
static struct truth_log alloc_log_file = { "FAKECUDA_ALLOC_LOG", -2, PTHREAD_MUTEX_INITIALIZER };

void fk_alloc_log(const char *what, size_t bytes, uint64_t ns)
{
	char line[160], comm[32] = "?";
	int n;

	if (prctl(PR_GET_NAME, comm, 0, 0, 0))
		strcpy(comm, "?");
	n = snprintf(line, sizeof(line), "%s %d %s %ld %zu %llu\n", what, (int)getpid(), comm,
		     (long)syscall(SYS_gettid), bytes, (unsigned long long)ns);
	if (n > 0 && (size_t)n < sizeof(line))
		truth_log(&alloc_log_file, line, (size_t)n);
}

CUresult fk_host_sync(struct fk_ctx *ctx, struct fk_fence *f)
{
	uint64_t t0 = fk_now_ns();
	CUresult r = fake_wait(ctx, f);

	wait_log(fk_now_ns() - t0);
	fk_fence_release(f);
	return r;
}

/* ---- operations ---- */

struct fk_op *fk_op_new(enum fk_op_type type)
{
	struct fk_op *op = calloc(1, sizeof(*op));

	if (op)
		op->type = type;
	return op;
}

void fk_op_free(struct fk_op *op)
{
	if (!op)
		return;
	for (int i = 0; i < op->ndeps; i++)
		fk_point_put(&op->deps[i]);
	if (op->type == FK_OP_COPY)
		free(op->copy.staging);
	if (op->type == FK_OP_EVENT && op->event.ev)
		fk_event_put(op->event.ev);
	free(op);
}

CUresult fk_submit(struct fk_stream *s, struct fk_op *op, struct fk_point *done)
{
	struct fk_ctx *ctx = s->ctx;

	pthread_mutex_lock(&ctx->lock);
	/*
	 * Legacy default stream: an op on it starts after all earlier work of the blocking
	 * streams, and later work of blocking streams starts after it. Non-blocking streams
	 * (CU_STREAM_NON_BLOCKING) are exempt both ways.
	 */
	if (s->legacy) {
		for (int i = 0; i < ctx->nstreams; i++) {
			struct fk_stream *t = ctx->streams[i];

			if (t != s && !(t->flags & CU_STREAM_NON_BLOCKING))
				add_point_locked(op->deps, &op->ndeps, t);
		}
	} else if (!(s->flags & CU_STREAM_NON_BLOCKING)) {
		add_point_locked(op->deps, &op->ndeps, ctx->legacy);
	}
	op->seq = ++s->submitted;
	if (done) {
		done->s = fk_stream_get(s);
		done->seq = op->seq;
	}
	/* Queued under ctx->lock too, so the queue order is the seq order. */
	pthread_mutex_lock(&s->qlock);
	if (s->tail)
		s->tail->next = op;
	else
		s->head = op;
	s->tail = op;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	pthread_mutex_unlock(&ctx->lock);
	return CUDA_SUCCESS;
}

/* Engine-side wait for an op's dependencies: not the host wait function, on purpose. */
static void engine_wait_deps(const struct fk_op *op)
{
	for (;;) {
		uint32_t gen = atomic_load_explicit(&fk_done_gen, memory_order_acquire);
		bool ready = true;

		for (int i = 0; i < op->ndeps && ready; i++)
			ready = fk_point_done(&op->deps[i]);
		if (ready)
			return;
		futex_wait(&fk_done_gen, gen);
	}
}

static uint64_t copy_time_ns(enum fk_dir dir, size_t bytes, bool pageable)
{
	double bw = dir == FK_DTOD ? fk_config.dtod_bytes_per_ns
		    : pageable	   ? fk_config.pageable_bytes_per_ns
				   : fk_config.copy_bytes_per_ns;

	return fk_config.copy_lat_ns + (uint64_t)((double)bytes / bw);
}

static void exec_copy(struct fk_ctx *ctx, struct fk_op *op)
{
	/* HtoD and DtoH have a copy engine each; DtoD and HtoH use the SMs, which do not queue. */
	pthread_mutex_t *engine = op->copy.dir == FK_HTOD   ? &ctx->copy_engine[0]
				  : op->copy.dir == FK_DTOH ? &ctx->copy_engine[1]
							    : NULL;
	const void *src = op->copy.staging ? op->copy.staging : op->copy.src;
	uint64_t start, migrate;

	if (engine)
		pthread_mutex_lock(engine);
	start = fk_now_ns();
	migrate = fk_mig_device_use(src, op->copy.bytes) +
		  fk_mig_device_use(op->copy.dst, op->copy.bytes);
	memmove(op->copy.dst, src, op->copy.bytes);
	fk_engine_sleep_until(start + migrate +
			      copy_time_ns(op->copy.dir, op->copy.bytes, op->copy.pageable));
	fk_mig_device_done(src, op->copy.bytes);
	fk_mig_device_done(op->copy.dst, op->copy.bytes);
	if (engine)
		pthread_mutex_unlock(engine);
}

static void exec_memset(struct fk_op *op)
{
	uint64_t start = fk_now_ns();
	size_t n = op->memset.count;
	uint64_t migrate = fk_mig_device_use(op->memset.dst, n * op->memset.elem);

	switch (op->memset.elem) {
	case 1:
		memset(op->memset.dst, (int)op->memset.value, n);
		break;
	case 2: {
		uint16_t *p = op->memset.dst;

		for (size_t i = 0; i < n; i++)
			p[i] = (uint16_t)op->memset.value;
		break;
	}
	default: {
		uint32_t *p = op->memset.dst;

		for (size_t i = 0; i < n; i++)
			p[i] = op->memset.value;
		break;
	}
	}
	fk_engine_sleep_until(start + migrate + copy_time_ns(FK_DTOD, n * op->memset.elem, false));
	fk_mig_device_done(op->memset.dst, n * op->memset.elem);
}

static void exec_event(struct fk_op *op)
{
	struct fk_event *ev = op->event.ev;

	pthread_mutex_lock(&ev->lock);
	if (ev->gen == op->event.gen) {
		ev->time_ns = fk_now_ns();
		ev->timed = true;
	}
	pthread_mutex_unlock(&ev->lock);
}

static void *engine_main(void *arg)
{
	struct fk_stream *s = arg;
	struct fk_ctx *ctx = s->ctx;

	/* Precise wake-ups: the default 50 us timer slack would show up in every op's duration. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	for (;;) {
		struct fk_op *op;

		pthread_mutex_lock(&s->qlock);
		while (!s->head && !s->dead)
			pthread_cond_wait(&s->qcond, &s->qlock);
		op = s->head;
		if (op) {
			s->head = op->next;
			if (!s->head)
				s->tail = NULL;
		}
		pthread_mutex_unlock(&s->qlock);
		if (!op)
			break; /* destroyed and drained */

		engine_wait_deps(op);
		switch (op->type) {
		case FK_OP_KERNEL:
			fk_kernel_run(&op->kernel.fn, op->kernel.args,
				      fk_now_ns() + fk_config.launch_lat_ns);
			break;
		case FK_OP_COPY:
			exec_copy(ctx, op);
			break;
		case FK_OP_MEMSET:
			exec_memset(op);
			break;
		case FK_OP_EVENT:
			exec_event(op);
			break;
		case FK_OP_NOP:
			break;
		}
		atomic_store_explicit(&s->last_end_ns, fk_now_ns(), memory_order_relaxed);
		atomic_store_explicit(&s->completed, op->seq, memory_order_release);
		atomic_fetch_add_explicit(&fk_done_gen, 1, memory_order_acq_rel);
		futex_wake_all(&fk_done_gen);
		fk_op_free(op);
	}

	/* Leave the context's list: from now on nobody can depend on this stream's future. */
	pthread_mutex_lock(&ctx->lock);
	for (int i = 0; i < ctx->nstreams; i++) {
		if (ctx->streams[i] == s) {
			ctx->streams[i] = ctx->streams[--ctx->nstreams];
			break;
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	fk_stream_put(s);
	return NULL;
}

/* ---- streams ---- */

/* Streams per context: below FK_FENCE_MAX, so a context-wide fence always fits. */
#define FK_MAX_STREAMS (FK_FENCE_MAX - 4)

static void ctx_put(struct fk_ctx *ctx);

struct fk_stream *fk_stream_get(struct fk_stream *s)
{
	atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
	return s;
}

void fk_stream_put(struct fk_stream *s)
{
	if (atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&s->qlock);
	pthread_cond_destroy(&s->qcond);
	ctx_put(s->ctx);
	free(s);
}

CUresult fk_stream_new(struct fk_ctx *ctx, unsigned int flags, int priority, bool legacy,
		       bool per_thread, struct fk_stream **ret)
{
	struct fk_stream *s;
	pthread_attr_t attr;
	sigset_t all, old;
	int err;

	s = calloc(1, sizeof(*s));
	if (!s)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* One reference for the handle (dropped by fk_stream_retire), one for the thread. */
	atomic_init(&s->refs, 2);
	s->ctx = ctx;
	s->flags = flags;
	s->priority = priority;
	s->legacy = legacy;
	s->per_thread = per_thread;
	pthread_mutex_init(&s->qlock, NULL);
	pthread_cond_init(&s->qcond, NULL);

	pthread_mutex_lock(&ctx->lock);
	if (ctx->nstreams >= FK_MAX_STREAMS) {
		pthread_mutex_unlock(&ctx->lock);
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (ctx->nstreams == ctx->cap_streams) {
		int cap = ctx->cap_streams ? 2 * ctx->cap_streams : 8;
		struct fk_stream **v = realloc(ctx->streams, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&ctx->lock);
			free(s);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		ctx->streams = v;
		ctx->cap_streams = cap;
	}
	/* Engine threads take no signals: the application's handlers run on its own threads. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	err = pthread_create(&s->thread, &attr, engine_main, s);
	pthread_attr_destroy(&attr);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		pthread_mutex_unlock(&ctx->lock);
		pthread_mutex_destroy(&s->qlock);
		pthread_cond_destroy(&s->qcond);
		free(s);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	atomic_fetch_add(&ctx->refs, 1);
	ctx->streams[ctx->nstreams++] = s;
	pthread_mutex_unlock(&ctx->lock);
	pthread_setname_np(s->thread, legacy ? "fakecuda-s0" : "fakecuda-strm");
	*ret = s;
	return CUDA_SUCCESS;
}

void fk_stream_retire(struct fk_stream *s)
{
	pthread_mutex_lock(&s->qlock);
	s->dead = true;
	pthread_cond_signal(&s->qcond);
	pthread_mutex_unlock(&s->qlock);
	fk_stream_put(s);
}

/* ---- contexts ---- */

static void ctx_put(struct fk_ctx *ctx)
{
	if (atomic_fetch_sub_explicit(&ctx->refs, 1, memory_order_acq_rel) != 1)
		return;
	pthread_mutex_destroy(&ctx->lock);
	pthread_mutex_destroy(&ctx->copy_engine[0]);
	pthread_mutex_destroy(&ctx->copy_engine[1]);
	free(ctx->streams);
	free(ctx);
}

static _Atomic uint64_t fk_ctx_ids;

CUresult fk_ctx_new(CUdevice dev, unsigned int flags, bool primary, struct fk_ctx **ret)
{
	struct fk_ctx *ctx = calloc(1, sizeof(*ctx));
	CUresult r;

	if (!ctx)
		return CUDA_ERROR_OUT_OF_MEMORY;
	atomic_init(&ctx->refs, 1);
	ctx->id = atomic_fetch_add(&fk_ctx_ids, 1) + 1;
	ctx->dev = dev;
	ctx->primary = primary;
	atomic_init(&ctx->flags, flags);
	pthread_mutex_init(&ctx->lock, NULL);
	pthread_mutex_init(&ctx->copy_engine[0], NULL);
	pthread_mutex_init(&ctx->copy_engine[1], NULL);
	r = fk_stream_new(ctx, 0, 0, true, false, &ctx->legacy);
	if (r != CUDA_SUCCESS) {
		ctx_put(ctx);
		return r;
	}
	if (fk_handle_add(ctx, FK_T_CTX) < 0) {
		fk_stream_retire(ctx->legacy);
		ctx_put(ctx);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*ret = ctx;
	return CUDA_SUCCESS;
}

CUresult fk_ctx_destroy(struct fk_ctx *ctx)
{
	struct fk_fence f;
	struct fk_stream *legacy;
	CUresult r;

	fk_handle_del(ctx);
	/* Like the real driver, destroying a context first waits for its work. */
	fk_ctx_fence(ctx, &f);
	r = fk_host_sync(ctx, &f);
	legacy = ctx->legacy;
	ctx->legacy = NULL;
	fk_stream_retire(legacy);
	/* Streams the user did not destroy go with the context (their handles die with it). */
	pthread_mutex_lock(&ctx->lock);
	for (int i = 0; i < ctx->nstreams; i++) {
		struct fk_stream *s = ctx->streams[i];

		if (s != legacy && fk_handle_is(s, FK_T_STREAM)) {
			fk_handle_del(s);
			pthread_mutex_unlock(&ctx->lock);
			fk_stream_retire(s);
			pthread_mutex_lock(&ctx->lock);
			i = -1; /* the list may have changed meanwhile: rescan */
		}
	}
	pthread_mutex_unlock(&ctx->lock);
	ctx_put(ctx);
	return r;
}
