/* SPDX-License-Identifier: MIT */
/*
 * ffm_plan.h — the FFM stage plan: which stage the next run of a job key gets, and what a stage
 * probes. ffm_plan__next is a pure function over plain structs (no I/O, no globals, -errno on
 * bad input); ffm_plan__input reads its input from a key's store, for ffmd and the CLI alike.
 * The rules (order, retries, giving up, monitoring, drift, overrides) and why: docs/DESIGN.md,
 * "The stage plan".
 */
#ifndef FFM_PLAN_H
#define FFM_PLAN_H

#include <stdbool.h>
#include <stdint.h>

enum ffm_stage {
	FFM_STAGE_NONE = 0,
	FFM_STAGE_BASELINE = 1, /* wait function only: wall time, which public functions sync */
	FFM_STAGE_DETAIL = 2,   /* per-call timing of syncs, transfers, alloc/free, memset, launch */
	FFM_STAGE_MEMORY = 3,   /* memory tracing after syncs, hashing of transfers */
	FFM_STAGE_SYNC_USE = 4, /* time from sync end to the first use of protected data */
	FFM_STAGE__MAX,
};

#define FFM_PLAN_MAX_FAILURES 2
#define FFM_STAGE_BIT(s) (1u << (s))

/* What to probe. The daemon maps each class to symbols (daemon/apis.c) and offsets. */
#define FFM_PROBE_PROC 0x0001u        /* process start/exit: the run's wall time */
#define FFM_PROBE_WAIT 0x0002u        /* the internal wait function, entry+return, stack id */
#define FFM_PROBE_SYNC_FUNCS 0x0004u  /* synchronizing public functions found in stage 1 */
#define FFM_PROBE_SYNC_STATIC 0x0008u /* FFM_API_SYNC table, when stage 1's list is missing */
#define FFM_PROBE_TRANSFER 0x0010u    /* every cuMemcpy* entry point */
#define FFM_PROBE_ALLOC 0x0020u
#define FFM_PROBE_FREE 0x0040u
#define FFM_PROBE_MEMSET 0x0080u
#define FFM_PROBE_LAUNCH 0x0100u
#define FFM_PROBE_MEMTRACE 0x0200u /* first CPU touch of GPU-written memory after a sync */
#define FFM_PROBE_HASH 0x0400u     /* hash the bytes of each transfer */
#define FFM_PROBE_SYNC_USE 0x0800u /* time the first use at stage 3's instructions */
#define FFM_PROBE_CTX_END 0x1000u  /* context releases, entry only: where a sampled process's
				    * work ends (adaptive stage 1, daemon side only) */
#define FFM_PROBE_SYNC_QUERIES 0x2000u /* with SYNC_FUNCS: the list's queries and getters too
					* (benchmarks only: what leaving them out saves) */
#define FFM_PROBE_COPIES (FFM_PROBE_TRANSFER | FFM_PROBE_MEMSET)
#define FFM_PROBE_CPU_SAMPLE 0x4000u /* CPU samples of the Python threads that call the driver:
				      * the CPU time a line's library call spends around its
				      * driver calls (daemon side only: no uprobe) */

enum ffm_plan_reason {
	FFM_PLAN_NEXT = 0,  /* the next stage in order */
	FFM_PLAN_RETRY,     /* the last run of this stage was partial or aborted */
	FFM_PLAN_OVERRIDE,  /* --stage N */
	FFM_PLAN_MONITOR,   /* every stage is done: stage-1 probes to watch for drift */
	FFM_PLAN_DRIFT,     /* behaviour changed: re-trace from stage 2 */
};

struct ffm_plan_input {
	uint32_t completed; /* FFM_STAGE_BIT(s) for each stage with a complete run */
	/* partial/aborted runs of each stage since its last complete run (index = stage) */
	uint8_t failures[FFM_STAGE__MAX];
	bool time_copies;   /* the key's stage-3 run found duplicate transfers (stages/plan_key.c):
			     * monitoring runs time the copies too */
	bool drift;         /* the store saw the job's behaviour change since stages 2-4 ran
			     * (stages/plan_key.c: waits >= 1% at call sites new to the key) */
	int override_stage; /* --stage N: 1..4; 0 = none */
};

struct ffm_plan {
	uint32_t stage;      /* enum ffm_stage, 1..4 */
	uint32_t probes;     /* FFM_PROBE_* */
	uint32_t reason;     /* enum ffm_plan_reason */
	uint32_t skipped;    /* FFM_STAGE_BIT(s) of stages given up */
	uint32_t invalidate; /* FFM_STAGE_BIT(s) whose completion the store must forget */
	bool analysis_ready; /* stages 1-4 are complete or given up: a full report is possible */
};

/* -EINVAL for a NULL argument or an override outside 1..4. */
int ffm_plan__next(const struct ffm_plan_input *in, struct ffm_plan *out);

/* Whether @p is a monitoring run that times the copies too (in->time_copies): stage 1's
 * records, and the copy and memset calls besides. */
static inline bool ffm_plan__times_copies(const struct ffm_plan *p)
{
	return p->stage == FFM_STAGE_BASELINE && (p->probes & FFM_PROBE_COPIES);
}

/* The probe set of a stage run normally (stage-1 list available); 0 for an unknown stage. */
uint32_t ffm_plan__probes(enum ffm_stage stage);

/* ---- the plan of a key, from its store (stages/plan_key.c) ---- */
struct ffm_store;
struct ffm_store_stage_history;

/* The plan's input from what the key's store @s knows of its runs: complete stages, failures
 * (runs the collector's restart cut short aside), drift, duplicate copies; @hist gets the
 * store's stage history. ffmd plans a run from it, the CLI says what that run will be. */
int ffm_plan__input(struct ffm_store *s, int override_stage, struct ffm_plan_input *in,
		    struct ffm_store_stage_history *hist);
/* The plan of the key's next run without an override: ffm_plan__input, then ffm_plan__next. */
int ffm_plan__of_key(struct ffm_store *s, struct ffm_plan *out);

#endif /* FFM_PLAN_H */
