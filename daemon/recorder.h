/* SPDX-License-Identifier: MIT */
/*
 * The recorder: turns the collector's records of one job run into rows of the job key's store.
 *
 * - Stacks: a FFM_REC_STACK record is unwound with the process's CFI (symbols/) and symbolized;
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

#include <stddef.h>
#include <stdint.h>

struct ffm_store;
struct ffm_collector;
struct ffm_symbolizer;
struct ffm_apis;
struct ffm_memtrace;

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
};

struct ffm_recorder_stats {
	uint64_t waits, calls, stacks, unknown_keys;
};

struct ffm_recorder;

int ffm_recorder__new(const struct ffm_recorder_opts *opts, struct ffm_recorder **ret);
struct ffm_recorder *ffm_recorder__free(struct ffm_recorder *r);
/* One record (of this recorder's job slot); -errno only for store failures. */
int ffm_recorder__record(struct ffm_recorder *r, const void *rec, size_t size);
void ffm_recorder__stats(const struct ffm_recorder *r, struct ffm_recorder_stats *out);
/* The run ends: what is summed until then (CPU samples) into the store. */
int ffm_recorder__end(struct ffm_recorder *r);

#endif
