/* SPDX-License-Identifier: MIT */
/*
 * ffm_model.h — the analysis stage of FFM (Diogenes, SC'19, section 3.5): the CPU timeline graph
 * of one run, the expected-benefit algorithm of Figure 5, and the node groupings of 3.5.2.
 *
 * Contract
 *   - Plain structs in, numbers out. No I/O, no globals; errors are -errno. All times are in
 *     nanoseconds of one clock (the daemon uses CLOCK_MONOTONIC).
 *   - ffm_graph__build() *borrows* the event array: it must stay valid and unchanged until
 *     ffm_graph__free(). The graph itself is immutable after build; every analysis function takes
 *     a const graph, allocates its own scratch, and may run concurrently with the others.
 *   - Cost: O(n) throughout: build buckets events per thread (counting sort) and radix-sorts a
 *     thread only when its calls are out of order (32 B/event of scratch, freed before the nodes
 *     exist); benefit, each grouping and each subsequence estimate are O(nodes). Memory: 13 bytes
 *     per node (at most 3 nodes per event, 2 per thread) + 4 bytes per problematic node; no
 *     per-node allocation. 10M events: ~1-2 s and ~900 MiB peak, the caller's 610 MiB of events
 *     included (build/bench/bench_model).
 *
 * The graph (one CPU chain per thread, closed by an END node), the algorithm of Figure 5 and where
 * it departs from the paper, the problem types beyond the paper's, how threads' savings combine
 * and the groupings, with the reasons and the H100 measurements: docs/ACCURACY.md, "The
 * expected-benefit model" (its subsections are named where the code cites them).
 */
#ifndef FFM_MODEL_H
#define FFM_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "common/oatab.h"

/* What a driver call does, as far as the model cares. */
enum ffm_call_kind {
	FFM_CALL_OTHER = 0,
	FFM_CALL_SYNC,     /* explicit synchronization (cuCtxSynchronize, cuStreamSynchronize, ...) */
	FFM_CALL_LAUNCH,   /* kernel / graph launch: CLaunch */
	FFM_CALL_TRANSFER, /* cuMemcpy*: CLaunch */
	FFM_CALL_MEMSET,   /* cuMemset*: CLaunch */
	FFM_CALL_ALLOC,
	FFM_CALL_FREE,
	FFM_CALL__MAX,
};

enum ffm_problem {
	FFM_PROBLEM_NONE = 0,
	FFM_PROBLEM_UNNECESSARY_SYNC,
	FFM_PROBLEM_MISPLACED_SYNC,
	FFM_PROBLEM_DUPLICATE_TRANSFER,
	FFM_PROBLEM_HOST_READ,	    /* a small read of GPU results every iteration (see below) */
	FFM_PROBLEM_LAUNCH_BLOCKED, /* a launch that waited: the GPU's queue was full */
	/* the allocation of a temporary buffer allocated and freed every step: its fix (one
	 * buffer reused) deletes the work of ffm_graph_opts.deleted_of, whichever side bounds */
	FFM_PROBLEM_TEMP_BUFFER,
	FFM_PROBLEM__MAX,
};

/* ffm_event.flags */
#define FFM_EVENT_SYNC 0x1u /* the wait inside this call is a CPU/GPU synchronization */
/* The call's thread is not its process's main thread: its chain ends with its last call, since
 * the thread is gone after it (a main thread's chain runs to the end of the run, whose last
 * stretch of CPU work can still overlap the GPU before the process's implicit sync). */
#define FFM_EVENT_WORKER 0x2u
/* The sync half of a call that is also a duplicate transfer (the copy half is the event just
 * before it): one call, two problems. The model treats it as any event; counts of calls skip it. */
#define FFM_EVENT_SPLIT 0x4u
/* An unnecessary sync or host read whose ffm_event.gpu_idle_ns is known: the GPU ran through
 * the stretch before its wait (see "GPU idle after the sync" above). */
#define FFM_EVENT_GPU_IDLE 0x8u

/* One driver call of one thread (stage 2 data, annotated with stages 3 and 4). 64 bytes. */
struct ffm_event {
	uint64_t start_ns;     /* call entry */
	uint64_t dur_ns;       /* entry to return, waiting included */
	uint64_t wait_ns;      /* time in the wait function inside the call (≤ dur_ns) */
	uint64_t stack_id;     /* call-stack id: the single-point key */
	union {
		uint64_t first_use_ns; /* misplaced sync: sync end to the first use of protected data */
		/* unnecessary sync, host read with FFM_EVENT_GPU_IDLE: how long the GPU idled
		 * from the wait's end until its thread's next submission */
		uint64_t gpu_idle_ns;
	};
	/* unnecessary sync, host read: CPU time outside the wait that the fix deletes with the
	 * wait (the rest of an explicit sync call; a host read's copy and sync calls) */
	uint64_t removed_ns;
	uint32_t tid;          /* CPU thread: one chain per tid */
	uint32_t fold_id;      /* folded-function key, interned by the caller */
	uint32_t api_id;       /* driver API function, the caller's numbering */
	uint8_t kind;          /* enum ffm_call_kind */
	uint8_t problem;       /* enum ffm_problem */
	uint8_t flags;         /* FFM_EVENT_* */
	uint8_t _pad;
};

enum ffm_node_type {
	FFM_NODE_CWORK = 0,
	FFM_NODE_CLAUNCH,
	FFM_NODE_CWAIT,
};

#define FFM_NO_EVENT UINT32_MAX

/* A node as the accessors return it (the graph stores nodes far more compactly). */
struct ffm_node {
	uint64_t start_ns; /* exact for non-overlapping events (see "tile" above) */
	uint64_t dur_ns;   /* as measured (clipped); the algorithm never changes it */
	uint64_t stack_id;
	uint64_t first_use_ns;
	uint64_t removed_ns; /* the event's (unnecessary sync, host read) */
	uint32_t event; /* index into the event array; FFM_NO_EVENT for pure gaps and END */
	uint32_t tid;
	uint32_t fold_id;
	uint32_t api_id;
	uint8_t type;    /* enum ffm_node_type */
	uint8_t problem; /* enum ffm_problem */
	uint8_t sync;    /* 1: a synchronization (NextSync candidate) */
	uint8_t end;     /* 1: the implicit end-of-run synchronization closing a chain */
	uint32_t _pad;
};

struct ffm_chain {
	uint32_t tid;
	uint32_t first_node; /* nodes [first_node, first_node + n_nodes), the last one is END */
	uint32_t n_nodes;
	uint32_t n_events;
	uint64_t start_ns; /* first call's entry */
	uint64_t end_ns;   /* the run's end (END node) */
};

/* A NextSync wait this long is a wait for GPU work, not a sync call's own cost on a finished
 * stream (2-3 µs inside the driver on the H100): see "GPU-busy CPU time". */
#define FFM_MODEL_BUSY_WAIT_NS 10000u

struct ffm_graph_opts {
	/* The run's bounds (stage 1's process start/exit). 0 = the first entry / last return of the
	 * events. Events outside the given bounds widen them: the wall time is never shorter than
	 * what the events span. Every chain's trailing CWork runs to run_end_ns. */
	uint64_t run_start_ns;
	uint64_t run_end_ns;
	/* Work a fix deletes from whichever side bounds the run, per event (index -> ns, at
	 * most UINT32_MAX - 1): a pageable copy's staging that a pinned buffer removes, say
	 * (stages/ffm_price.h). An unnecessary sync or host read then saves min(idle + deleted,
	 * wait + removed) instead of min(idle, wait + removed): its CPU time outside the wait no
	 * longer needs CPU work to hide under; a misplaced sync min(first use + deleted, wait)
	 * (the exit latency a shorter wait saves); a temporary buffer's allocation saves its
	 * deleted work (the set's allocations, fills and frees but one: stages/ffm_price.h rule
	 * (c)), whichever side bounds. NULL: none. Borrowed for the graph's life. */
	const struct oatab *deleted_of;
};

struct ffm_graph;

/* -EINVAL: bad kind/problem, a duplicate-transfer problem on a non-transfer call, NULL events
 * with n > 0; -E2BIG: more than 2^32 - 2 events or nodes; -ENOMEM. */
int ffm_graph__build(const struct ffm_event *ev, size_t n, const struct ffm_graph_opts *opts,
		     struct ffm_graph **ret);
struct ffm_graph *ffm_graph__free(struct ffm_graph *g); /* NULL-safe, returns NULL */

size_t ffm_graph__node_count(const struct ffm_graph *g);
size_t ffm_graph__chain_count(const struct ffm_graph *g);
size_t ffm_graph__problem_count(const struct ffm_graph *g);
uint64_t ffm_graph__wall_ns(const struct ffm_graph *g);
/* -ERANGE when i is out of range. */
int ffm_graph__node(const struct ffm_graph *g, size_t i, struct ffm_node *out);
int ffm_graph__chain(const struct ffm_graph *g, size_t i, struct ffm_chain *out);
/* Node index of the k-th problematic node, in timeline order (chain by chain); -ERANGE. */
int64_t ffm_graph__problem_node(const struct ffm_graph *g, size_t k);

struct ffm_totals {
	uint64_t wall_ns;         /* the run's wall time */
	uint64_t wait_ns;         /* Σ sync waits: what a profiler without FFM would show */
	uint64_t problem_wait_ns; /* Σ waits of the problematic nodes (not a duplicate's copy) */
	uint64_t sum_ns;          /* Σ per-node benefits */
	uint64_t max_chain_ns;    /* largest per-thread sum (each is ≤ wall_ns) ... */
	uint32_t max_chain_tid;   /* ... and its thread: where most of the saving comes from */
	/* What the run's wall time loses (see "Threads"): sum_ns for one thread; with several, the
	 * savings of threads that wait side by side do not add up. Always ≤ wall_ns. */
	uint64_t total_ns;
};

/*
 * Figure 5 over all problematic nodes. benefit (optional) gets problem_count entries, in the
 * order of ffm_graph__problem_node(). Returns 0 or -ENOMEM; tot may be NULL.
 */
int ffm_model__benefit(const struct ffm_graph *g, uint64_t *benefit, struct ffm_totals *tot);

/*
 * Figure 5 over the given problematic nodes only (strictly ascending node indexes), every other
 * node left as it is: the benefit of fixing exactly these. benefit (optional) gets n entries;
 * *total the sum. -EINVAL for an unsorted list or a node without a problem, -ERANGE for a bad
 * index.
 */
int ffm_model__estimate(const struct ffm_graph *g, const uint32_t *nodes, size_t n,
			uint64_t *benefit, uint64_t *total);

enum ffm_grouping {
	FFM_GROUP_POINT = 0, /* key: stack id */
	FFM_GROUP_FOLD,      /* key: fold id */
	FFM_GROUP_SEQUENCE,  /* key: the sequence's ordinal in timeline order (chain by chain) */
	FFM_GROUP__MAX,
};

struct ffm_group {
	uint64_t key;
	uint64_t wait_ns;    /* Σ members' waits as measured (the profiler's view); a duplicate
			      * transfer's own copy time is no wait and is not in it */
	uint64_t benefit_ns; /* expected benefit of fixing all members, nothing else */
	uint32_t members;
	uint32_t problems;   /* bit (1u << enum ffm_problem) for each problem type among members */
	uint32_t first_node; /* first and last member, node indexes */
	uint32_t last_node;
	uint32_t tid; /* thread of the first member (the only one, for sequences) */
	uint32_t _pad;
};

/*
 * Groups the problematic nodes. *groups is a malloc'ed array (free() it) in the order of each
 * group's first member; *n its length (0 and NULL when there is nothing to group).
 */
int ffm_model__group(const struct ffm_graph *g, enum ffm_grouping how, struct ffm_group **groups,
		     size_t *n);

/*
 * The benefit of fixing only entries from..to (0-based, inclusive) of a sequence returned by
 * ffm_model__group(FFM_GROUP_SEQUENCE), from the stored graph, no new run. -EINVAL when seq is
 * not a sequence of this graph or from > to; -ERANGE when to ≥ seq->members.
 */
int ffm_model__subsequence(const struct ffm_graph *g, const struct ffm_group *seq, uint32_t from,
			   uint32_t to, uint64_t *benefit);

#endif /* FFM_MODEL_H */
