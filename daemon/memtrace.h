/* SPDX-License-Identifier: MIT */
/*
 * Stages 3 and 4 in the daemon: turns the records of the memory-tracing programs into the
 * store's xfer_hashes and sync_uses rows (store/ffm_store.h). The recorder feeds it every record
 * with the store ids it resolved (event, stack); memtrace keeps the per-process state:
 * protected ranges (DtoH destinations, managed allocations) and their watchpoints (4 windows of
 * 8 bytes shared by the most recently issued ranges, moved over each range from one issue to
 * the next, on each thread that called the driver; the bytes each sync's windows watched and
 * the range's coverage so far go into its row), each
 * thread's sync window ([a sync's end, the thread's next sync): its first watched access is the
 * sync's first use, none makes it FFM_SYNC_USE_NONE), and the content hashes that make a
 * transfer FFM_DUP_SAME_DST or FFM_DUP_OTHER_DST. docs/STAGES.md says what counts as a sync, a
 * protected range and a duplicate, what is flagged FFM_SYNC_USE_PARTIAL, and why. Stage 4
 * watches only ranges issued from the call stacks whose destinations stage 3 saw used
 * (use_stacks), and hashes nothing.
 */
#ifndef FFM_DAEMON_MEMTRACE_H
#define FFM_DAEMON_MEMTRACE_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/ffm.h"

struct ffm_store;
struct ffm_collector;
struct ffm_memtrace;

#define FFM_MEMTRACE_WATCHES 4 /* debug registers per thread (x86) */

struct ffm_memtrace_opts {
	size_t sz;
	struct ffm_store *store;         /* borrowed */
	int64_t run;
	struct ffm_collector *collector; /* borrowed; NULL: no watchpoints (nothing is used) */
	uint32_t stage;                  /* 3 or 4 */
	/* Stage 4: watch only ranges issued from these stacks (NULL: every range). */
	const int64_t *use_stacks;
	size_t nuse_stacks;
};

/* What the recorder knows about a FFM_REC_CALL once it stored it. */
struct ffm_memtrace_call {
	int64_t event, stack;  /* store ids (0 = unknown) */
	uint32_t kind;         /* enum ffm_api_kind */
	const char *name;      /* API base name */
};

struct ffm_memtrace_stats {
	uint64_t syncs, syncs_used, syncs_none, syncs_partial;
	uint64_t xfers, xfers_failed, dup_same, dup_other, ranges;
	uint64_t managed_faults; /* stage 4: the host's faults in managed memory after a call */
	/* Taken off every first-use delay: the timing's own cost on this machine, measured
	 * when the run began (ffm_collector__use_latency); 0 without watchpoints. */
	uint64_t use_latency_ns;
};

int ffm_memtrace__new(const struct ffm_memtrace_opts *opts, struct ffm_memtrace **ret);
struct ffm_memtrace *ffm_memtrace__free(struct ffm_memtrace *m);

/* Record hooks; -errno only for store failures. */
int ffm_memtrace__on_call(struct ffm_memtrace *m, const struct ffm_rec_call *c,
			  const struct ffm_memtrace_call *info);
int ffm_memtrace__on_wait(struct ffm_memtrace *m, const struct ffm_rec_wait *w, int64_t event,
			  int64_t stack);
/* @stack: the store stack of the issuing call if its key is already known, else 0. */
int ffm_memtrace__on_range(struct ffm_memtrace *m, const struct ffm_rec_range *r, int64_t stack);
int ffm_memtrace__on_xfer(struct ffm_memtrace *m, const struct ffm_rec_xfer *x);
int ffm_memtrace__on_hit(struct ffm_memtrace *m, const struct ffm_rec_hit *h, int64_t stack);
/* Stage 4: a page fault of a thread of a process with managed memory (counted per call site,
 * see "the host's page faults in managed memory" in memtrace.c; stored at ffm_memtrace__end). */
int ffm_memtrace__on_fault(struct ffm_memtrace *m, const struct ffm_rec_fault *f);
int ffm_memtrace__on_exit(struct ffm_memtrace *m, uint32_t tgid);
void ffm_memtrace__stats(const struct ffm_memtrace *m, struct ffm_memtrace_stats *out);
/* Close every open window and release the watchpoints, then the run flags: FFM_RUN_PARTIAL
 * (see FFM_MEMTRACE_PARTIAL_SHARE) and FFM_RUN_DIVERGENT against @ref_run (the key's latest
 * stage-2 run, 0 = none) into *flags. */
int ffm_memtrace__end(struct ffm_memtrace *m, int64_t ref_run, uint32_t *flags);

/* The BPF job flags (FFM_JOB_MEMTRACE, FFM_JOB_HASH) a plan's probe set needs. */
uint32_t ffm_memtrace_job_flags(uint32_t plan_probes);

/* FFM_RUN_DIVERGENT: per call site, the counts of the calls both stages probe differ from
 * the stage-2 run's by more than this share (and at least 3 calls). */
#define FFM_MEMTRACE_DIVERGENCE 0.10

/* More than this share of a run's syncs flagged FFM_SYNC_USE_PARTIAL: the run is partial. */
#define FFM_MEMTRACE_PARTIAL_SHARE 0.10

#endif
