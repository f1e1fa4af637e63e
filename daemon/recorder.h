/* SPDX-License-Identifier: MIT */
/*
 * The recorder: turns the collector's records of one job run into rows of the job key's store.
 *
 * - Stacks: a FFM_REC_STACK record is unwound with the process's CFI (symbols/) and symbolized;
 *   with an unwinder (ffmd) that is done on its worker thread (daemon/unwinder.h), and the
 *   job's later records are held back, in order, until the stack is stored: a record that uses
 *   the stack's key finds it, nothing is reordered. At most FFM_HELD_MAX_BYTES are held at once;
 *   more are counted as not stored (the run is then flagged as having lost records).
 *   its identity in the store is a hash of its frames' (build-id, file offset), so the same call
 *   path has the same stack id in every process and every run (addresses differ under ASLR).
 *   The recorder then tells the collector where the application's return addresses sit
 *   (learned slots), so later calls on that path are keyed in BPF without a stack copy.
 * - Waits outside a probed call (stage 1) are attributed to the public driver function that
 *   contains the outermost libcuda frame of their stack: "which public functions wait".
 * - API ids and stack hashes in the store are the store's stable ids (ffm_store_api_id,
 *   ffm_store_stack_hash: store/ffm_store.h), so runs recorded by different daemon instances
 *   agree.
 */
#ifndef FFM_RECORDER_H
#define FFM_RECORDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct ffm_store;
struct ffm_collector;
struct ffm_symbolizer;
struct ffm_apis;
struct ffm_memtrace;
struct ffm_unwinder;

/*
 * What one run may take (a job's user controls all of it: a flood of new stacks, long names,
 * a growing store must not stall ffmd nor fill its disk). Past a bound the run degrades and
 * counts: new stacks are not stored (FFM_DROP_STACK_CAP; their calls are, without a stack),
 * nor, past the store bytes, any record (FFM_DROP_STORE_CAP). 0 in a field: no bound.
 */
struct ffm_run_limits {
	uint32_t stacks;        /* new stacks stored per run */
	uint32_t stacks_per_s;  /* ... per second, in bursts of FFM_STACK_BURST_S seconds' worth */
	uint32_t string_bytes;  /* bytes kept of each name or file of a frame (cut with "...") */
	uint32_t code_objects;  /* Python code objects remembered per run (more: read each time) */
	uint64_t store_bytes;   /* what the run may add to its store (file and WAL) */
	uint64_t user_store_bytes; /* what the active runs of one user may add together */
};
#define FFM_STACK_BURST_S 5
#define FFM_RUN_LIMITS_DEFAULT                                                                     \
	((struct ffm_run_limits){ .stacks = 20000, .stacks_per_s = 1000, .string_bytes = 2048,     \
				  .code_objects = 65536, .store_bytes = 512ull << 20,              \
				  .user_store_bytes = 1024ull << 20 })

struct ffm_recorder_opts {
	size_t sz;
	struct ffm_store *store;         /* borrowed */
	int64_t run;                     /* store run id */
	struct ffm_collector *collector; /* borrowed; NULL: no slot learning */
	struct ffm_symbolizer *sym;      /* borrowed */
	struct ffm_apis *apis;           /* borrowed */
	const char *proc_root;           /* NULL = "/proc" */
	const char *driver_build_id;     /* identifies libcuda frames; NULL = by file name */
	struct ffm_memtrace *memtrace;   /* borrowed; stages 3-4, NULL otherwise */
	unsigned cpu_sample_hz;          /* CPU samples of Python threads (stage 2), 0: none */
	const struct ffm_run_limits *limits; /* NULL: FFM_RUN_LIMITS_DEFAULT */
	/* borrowed, NULL: none; the recorder adds its time per part (unwinds and symbols, the
	 * Python checks, /proc reads) to it (store/ffm_store.h, enum ffm_overhead_part) */
	struct ffm_overhead *price;
	/* borrowed; NULL: stacks are unwound in the caller (ffmctl profile). Its worker is then
	 * the only user of @sym. */
	struct ffm_unwinder *unwinder;
};

#define FFM_HELD_MAX_BYTES (64u << 20)

struct ffm_recorder_stats {
	uint64_t waits, calls, stacks, unknown_keys;
	uint64_t stacks_capped;   /* new stacks not stored (limits.stacks or stacks_per_s) */
	uint64_t not_stored;      /* records not stored: the store is full (ffm_recorder__full) */
	uint64_t strings_cut;     /* frame names and files cut to limits.string_bytes */
	uint64_t kernels_capped;  /* kernel names not kept: FFM_MAX_KERNEL_NAMES a run */
};

/* Kernel names a run keeps (FFM_REC_FUNC), each at most FFM_FUNC_NAME - 1 bytes: a program
 * that makes handles in a loop fills no more than this. */
#define FFM_MAX_KERNEL_NAMES 4096

struct ffm_recorder;

int ffm_recorder__new(const struct ffm_recorder_opts *opts, struct ffm_recorder **ret);
struct ffm_recorder *ffm_recorder__free(struct ffm_recorder *r);
/* One record (of this recorder's job slot); -errno only for store failures (also those of
 * records held back earlier and stored since). */
int ffm_recorder__record(struct ffm_recorder *r, const void *rec, size_t size);
void ffm_recorder__stats(const struct ffm_recorder *r, struct ffm_recorder_stats *out);
/* The run's store reached its bytes (the caller measures): from now on records are counted,
 * not stored, except the processes' starts and ends. */
void ffm_recorder__full(struct ffm_recorder *r);
/* The run ends: the stacks still being unwound and the records held behind them are stored
 * (this waits for the unwinder's worker, whose opens each have a deadline, unless the recorder
 * is idle), then what is summed until then (CPU samples). */
int ffm_recorder__end(struct ffm_recorder *r);
/* Whether nothing of the run is on the unwinder or held behind it: end waits for nothing. */
bool ffm_recorder__idle(const struct ffm_recorder *r);
/* @fn(@ctx) is called on the loop once the recorder is idle, from the unwinder's callback
 * (ffm_unwinder__take), as the last thing the recorder does there: @fn may end and free it.
 * Once only; NULL: none. For a run's end that does not wait for its last stacks. */
void ffm_recorder__on_idle(struct ffm_recorder *r, void (*fn)(void *ctx), void *ctx);

#endif
