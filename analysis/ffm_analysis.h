/* SPDX-License-Identifier: MIT */
/*
 * analysis.h — the glue between one key's store and the benefit model (stages/ffm_model.h): it
 * picks the runs, turns stage 2's timeline into model events, annotates them with the verdicts
 * of stages 3 and 4, runs Figure 5 and the groupings, and hands the report plain results.
 * Library rules although it lives in cli/: returns -errno, never prints, keeps no globals.
 *
 * Which runs
 *   The runs of the key up to the last run of the report's job (what was known when that job
 *   ended; opts->job_only: that job's runs only, for `ffmctl diff`'s after side). Per stage the
 *   latest ended run, a complete one (no PARTIAL/ABORTED flag) over a newer incomplete one.
 *   Stage 2's run is the timeline; without one, stage 1's run gives per-site wait totals and no
 *   problems can be modelled.
 *
 * Events (stage 2 -> struct ffm_event)
 *   API calls: explicit/other API -> FFM_CALL_SYNC, transfer/memset/launch -> CLaunch kinds,
 *   alloc/free as such. FFM_EVENT_SYNC when the call is an API of the synchronizing kind (stage 1
 *   found it waiting, or it is an explicit sync) or it waited at all (wait_ns > 0). Wait-function
 *   events (only recorded outside probed calls) become syncs of their own unless they lie inside
 *   a call of the same thread. Fold key: the folded name of the stack's application frame (the
 *   first frame outside libcuda that has a source line, else the first outside libcuda).
 *   The event array is sized from stage 2's per-stack counts before the scan, so memory is the
 *   model's (56 bytes an event + the graph), never a doubling buffer.
 *
 * Verdicts (stages 3/4 -> problems)
 *   sync_uses rows of one sync occurrence (same event id: one row per protected range) form one
 *   verdict: unnecessary when every row says FFM_SYNC_USE_NONE with full coverage; no use seen
 *   but FFM_SYNC_USE_PARTIAL (not every protected range watched) is no verdict ("withheld": an
 *   unseen use is likely, and calling a required sync unnecessary is the costly mistake); else
 *   used, with the first-use delay = the smallest delay among its rows. Stage 4's delays replace
 *   stage 3's (stage 3's watch-and-hash run inflates them); without stage 4 stage 3's delays are
 *   used and the report says so. xfer_hashes FFM_DUP_SAME_DST = duplicate transfer.
 *   Misplaced is decided per call site: its used syncs are misplaced when the site's median
 *   first-use delay and its mean wait are both FFM_MISPLACED_FLOOR_NS or more (moving the sync
 *   saves min(delay, wait) per occurrence) AND the delay is at least 1/FFM_MISPLACED_WAIT_DIV
 *   of the mean wait or FFM_MISPLACED_ABS_NS; each occurrence then counts with its own delay
 *   (the model credits min(delay, wait)). Why: the paper only says "a large time gap". Any real
 *   gap is a real saving in the model; the floor keeps measurement noise out (a watchpoint trap
 *   costs ~15 µs, the probes a few µs: a sync used "at once" measures well under 20 µs), the
 *   relative part keeps a gap that recovers a sliver of a long wait from being called the problem
 *   (moving a 10 ms wait by 30 µs is not the fix) unless the gap is long in absolute terms
 *   (≥ 1 ms per occurrence adds up), and judging the site's typical occurrence keeps single noisy
 *   measurements at a required sync from adding up to a phantom problem.
 *   Join: stage 3/4 rows to stage 2 events by stack id, occurrence k of n2 in stage 2 taking
 *   verdict floor(k * n3 / n2) of the n3 rows of that stack (the identity when counts agree).
 *   When |n2 - n3| > max(1, n2 * FFM_JOIN_TOLERANCE_PCT / 100) the runs did different things at
 *   that site: every occurrence gets the site's majority verdict (median delay) and the site is
 *   flagged divergent ("run-to-run differences"). A transfer that is both a duplicate and an
 *   unnecessary/misplaced sync is split in two model events (its copy part and its wait), so
 *   both fixes are modelled.
 *
 * Identity across runs and stores: a site's key hashes its application frames (build-id or
 * module name, file offset) and API name, not store ids: the same call path in another run,
 * another job of the key or another node's store has the same key.
 */
#ifndef FFM_CLI_ANALYSIS_H
#define FFM_CLI_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stages/ffm_model.h"
#include "store/ffm_store.h"

#define FFM_MISPLACED_FLOOR_NS 20000ull  /* 20 µs: above probe + watchpoint noise */
#define FFM_MISPLACED_WAIT_DIV 10	 /* gap ≥ 10% of the sync's wait ... */
#define FFM_MISPLACED_ABS_NS 1000000ull /* ... or ≥ 1 ms */
#define FFM_JOIN_TOLERANCE_PCT 5

/* Roles of the runs the analysis used. */
enum ffm_an_role {
	FFM_AN_UNUSED = 0,
	FFM_AN_BASELINE,  /* stage 1: waits per site (the timeline when stage 2 is missing) */
	FFM_AN_TIMELINE,  /* stage 2 */
	FFM_AN_VERDICTS,  /* stage 3 */
	FFM_AN_FIRST_USE, /* stage 4 */
};

struct ffm_an_run {
	int64_t id;
	int stage;
	char job_id[128];
	double wall_s;
	uint64_t start_ns, end_ns;
	uint32_t flags; /* enum ffm_run_flags */
	bool ended;
	int role;	/* enum ffm_an_role */
	struct ffm_store_drops drops;
};

/* A call site: one stack of the store, described by its application frame. */
struct ffm_an_site {
	int64_t stack;
	uint64_t key;	  /* stable identity (see above) */
	uint32_t api;	  /* store api id */
	uint32_t kind;	  /* enum ffm_event_kind of its calls */
	const char *api_name, *function, *file, *module, *folded; /* never NULL ("" / "?") */
	uint32_t line;
	uint64_t offset;  /* of the application frame in its module */
	uint32_t fold_id;
	bool in_timeline; /* seen in the timeline run (else only in stage 3/4 rows) */
	/* the profile run's totals (stage 2, else stage 1) */
	uint64_t count, dur_ns, wait_ns, bytes;
	/* verdicts applied to the timeline's occurrences */
	uint64_t n_unnecessary, n_misplaced, n_dup, n_other_dst, n_partial, n_classified;
	uint64_t benefit_ns; /* fixing this site alone (point group) */
	bool divergent;	     /* stage 3/4 counts differ from stage 2's beyond the tolerance */
	bool delays_from_stage3;
	int64_t use_delay_ns; /* median first-use delay of its used occurrences, -1 = none */
	const char *use_function, *use_file; /* first use of the protected data, NULL = unknown */
	uint32_t use_line;
	int64_t first_xfer_stack; /* duplicates: the first transfer of the content (0 = unknown) */
	int first_xfer_site;	  /* its site index, -1 = not a site of this store */
};

/* A group of problems (enum ffm_grouping). Point: one site; fold: one function; sequence: a
 * pattern, i.e. every sequence whose members are the same sites in the same order. */
struct ffm_an_group {
	uint64_t key;	      /* merge key: site key / folded-name hash / hash of member site keys */
	uint32_t problems;    /* bit (1u << enum ffm_problem) per type among members */
	uint64_t count;	      /* problem occurrences */
	uint64_t occurrences; /* sequences: how often the pattern occurred (else = count) */
	uint64_t n_type[FFM_PROBLEM__MAX];
	uint64_t wait_ns, benefit_ns;
	uint32_t site;	      /* first member's site index */
	uint32_t n_members;   /* sequences: sites of the pattern, in order (seq_sites) */
	uint32_t *seq_sites;
	bool partial, divergent;
};

struct ffm_an_api {
	uint32_t api;
	const char *name;
	uint64_t calls, dur_ns, wait_ns;
	uint64_t benefit_ns; /* fixing every problem of this function, nothing else */
	uint64_t problems;
};

struct ffm_an_proc {
	uint32_t tgid;
	const char *exe;
	uint64_t start_ns, end_ns;
	uint64_t benefit_ns; /* its threads' share of the run's benefit, ≤ its span */
	uint32_t threads; /* that called the driver */
};

struct ffm_an_quality {
	uint64_t drops[FFM_DROP__MAX]; /* summed over the runs used */
	uint32_t incomplete_runs;      /* used runs flagged PARTIAL/ABORTED/DROPPED */
	uint64_t partial_syncs;	       /* sync verdicts with FFM_SYNC_USE_PARTIAL */
	uint64_t withheld_syncs;       /* ... of them without a use seen: not called unnecessary */
	uint32_t divergent_sites;
	uint32_t unmatched_sites;      /* stage 3/4 stacks the timeline does not have */
	uint64_t unclassified_syncs;   /* timeline syncs without any stage-3 verdict */
	uint64_t unclassified_wait_ns;
};

struct ffm_analysis_result {
	const char *key;
	struct ffm_an_run *runs; /* every run of the key considered, id order */
	size_t n_runs;
	int64_t run_baseline, run_timeline, run_verdicts, run_first_use; /* 0 = none */
	int64_t run_profile; /* the run the sites' times come from */
	bool have_problems; /* stage 3 verdicts exist for the timeline */
	uint64_t wall_ns;   /* the timeline's (process span), else the baseline's wall_s */
	struct ffm_totals totals;
	uint64_t events;	  /* timeline events scanned */
	uint64_t modelled_events; /* ... that the model needs (see keep_site in analysis.c) */
	uint64_t problem_nodes;
	struct ffm_an_site *sites; /* the profile run's sites, by time (wait, then duration) */
	size_t n_sites;
	struct ffm_an_group *groups; /* opts->grouping, by benefit, largest first */
	size_t n_groups;
	struct ffm_an_api *apis; /* by time waited, largest first */
	size_t n_apis;
	struct ffm_an_proc *procs; /* the timeline's processes in start order */
	size_t n_procs;
	struct ffm_an_quality q;
};

struct ffm_analysis_opts {
	size_t sz;
	const char *job_id; /* runs of the key up to this job's last run; NULL = all runs */
	bool job_only;	    /* only this job's runs */
	enum ffm_grouping grouping;
	bool keep_graph;    /* keep the model's graph for ffm_analysis__subsequence() */
	unsigned scan_threads; /* timeline read in this many parallel slices; 0 = by size/CPUs */
	int profile_stage;     /* sites' times from this stage's run (1 or 2); 0 = 2, else 1 */
};

struct ffm_analysis;

/* -ENOENT: opts->job_id has no runs in this store; store errors; -ENOMEM. */
int ffm_analysis__run(struct ffm_store *s, const struct ffm_analysis_opts *opts,
		      struct ffm_analysis **ret);
const struct ffm_analysis_result *ffm_analysis__result(const struct ffm_analysis *a);
/*
 * Sequence grouping with keep_graph: the benefit of fixing members from..to (0-based, inclusive)
 * of pattern @key in every occurrence of the pattern. -ENOENT: no such pattern; -ERANGE: to is
 * past the pattern; -EINVAL: no graph kept or not grouped by sequence.
 */
int ffm_analysis__subsequence(const struct ffm_analysis *a, uint64_t key, uint32_t from,
			      uint32_t to, uint64_t *benefit_ns, uint64_t *occurrences);
struct ffm_analysis *ffm_analysis__free(struct ffm_analysis *a);

const char *ffm_an_problem_name(unsigned problem); /* "unnecessary_sync", ... */

#endif
