/* SPDX-License-Identifier: MIT */
/*
 * ffm_analysis.h — the analysis of one key's store: picks the runs, turns stage 2's timeline into
 * the model's events with the verdicts of stages 3 and 4 (analysis/ffm_verdict.h), runs the
 * model and the groupings, and hands its users plain results. The single source of every
 * verdict: report, diff and export take theirs from here. Returns -errno, never prints, keeps no
 * globals. Its passes, and which runs, events and verdicts it uses: docs/DESIGN.md, "The
 * analysis's passes".
 */
#ifndef FFM_ANALYSIS_H
#define FFM_ANALYSIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "analysis/ffm_verdict.h"
#include "stages/ffm_model.h"
#include "store/ffm_store.h"

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
	int32_t exit_status; /* of the job's program (its first process), 128 + signal if killed */
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
	/* adaptive stage 1: count and times are estimates from sampling windows (analysis/
	 * sampled.c), with their standard errors */
	bool sampled;
	double count_se, wait_se_ns;
	/* verdicts applied to the timeline's occurrences */
	uint64_t n_unnecessary, n_misplaced, n_dup, n_partial, n_classified;
	/* stage 3: the share of its protected range its watch windows covered, best range of its
	 * syncs (ffm_verdict_coverage; valid when coverage_known) */
	double coverage;
	bool coverage_known;
	uint64_t n_host_read, n_launch_blocked;
	uint64_t n_temp_buffer; /* allocations of a temporary buffer reused by the fix */
	/* a memset of managed memory that the host faulted back after it (analysis/managed.c):
	 * its fix sets the buffer on the host or keeps it in device memory, not an async memset */
	bool managed_fix;
	uint64_t read_bytes; /* host read: the most bytes one of its syncs protected */
	/* host read: its removed reads whose first use came before the thread's next GPU
	 * submission (the value may feed it), and those whose use came after; conditional: the
	 * required-read rule (ffm_verdict_read_conditional): its benefit is what reading every N
	 * iterations would save if the value can wait, in no total; so is every other call
	 * site of a conditional read's line (.item()'s copy, whose fix deletes it too) */
	uint64_t n_use_first, n_submit_first;
	bool read_conditional;
	uint64_t n_xclassified; /* transfer verdicts applied */
	uint64_t benefit_ns; /* fixing this site alone (point group) */
	bool divergent;	     /* stage 3/4 counts differ from stage 2's beyond the tolerance */
	bool delays_from_stage3; /* no stage-4 run timed a use at this site */
	int64_t use_delay_ns; /* median first-use delay of its used occurrences, -1 = none */
	const char *use_function, *use_file; /* first use of the protected data, NULL = unknown */
	uint32_t use_line;
	int64_t first_xfer_stack; /* duplicates: the first transfer of the content (0 = unknown) */
	int first_xfer_site;	  /* its site index, -1 = not a site of this store */
	bool python; /* named by a Python frame: file, line, function (qualified name) */
	/* launches: the kernel launched most here (demangled), NULL when not named; how many
	 * other kernels this site launched too */
	const char *kernel;
	uint32_t other_kernels;
};

/* A group of problems (enum ffm_grouping). Point: one site; fold: one function; sequence: a
 * pattern, i.e. every sequence whose members are the same sites in the same order. */
struct ffm_an_group {
	uint64_t key;	      /* merge key: site key / folded-name hash / hash of member site keys */
	uint32_t problems;    /* bit (1u << enum ffm_problem) per type among members */
	uint64_t count;	      /* calls with a problem (a duplicate copy that also waited is one) */
	uint64_t occurrences; /* sequences: how often the pattern occurred (else = count) */
	uint64_t n_type[FFM_PROBLEM__MAX];
	uint64_t wait_ns, benefit_ns;
	uint32_t site;	      /* first member's site index */
	uint32_t n_members;   /* sequences: sites of the pattern, in order (seq_sites) */
	uint32_t period;      /* sequences: the first `period` sites repeat `repeats` times in a
				 row (a loop), the rest follow once; 0: no repetition */
	uint32_t repeats;
	uint32_t *seq_sites;
	bool partial, divergent;
	/* every problem of it is a conditional host read (ffm_an_site.read_conditional): its
	 * benefit is the conditional price, listed after the groups that count, in no total */
	bool conditional;
	double coverage;     /* the least of its members' ffm_an_site.coverage ... */
	bool coverage_known; /* ... when one of them has one */
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
	uint32_t failed_runs;	       /* used runs whose program exited with a status other than 0 */
	int32_t failed_status;	       /* the first such status */
	uint64_t partial_syncs;	       /* sync verdicts with FFM_SYNC_USE_PARTIAL */
	uint64_t withheld_syncs;       /* ... of them without a use seen: not called unnecessary */
	uint64_t site_misplaced_syncs; /* ... of them misplaced by their site's verdict and delay */
	uint32_t divergent_sites;
	uint32_t unmatched_sites;      /* stage 3/4 stacks the timeline does not have */
	uint64_t unclassified_syncs;   /* timeline syncs without any stage-3 verdict */
	uint64_t unclassified_wait_ns;
	/* The GPU's busiest stream: the union over the threads of the waits on one stream (its
	 * work was running then) is a lower bound of its busy time, which no CPU-side fix can
	 * shorten; nor the CPU work before that stream's first work (stream_head_ns: the time
	 * before it, less the waits that ended by then), nor the time after its last work where
	 * that ended with a kept wait (stream_tail_ns: the waiting thread's rest of the run, less
	 * its waits and deleted calls). Every benefit is capped at wall - stream_busy_ns -
	 * stream_head_ns - stream_tail_ns (capped: one was). */
	uint64_t stream_busy_ns;
	uint64_t stream_head_ns;
	uint64_t stream_tail_ns;
	bool stream_capped;
	/* The CPU time the Python host reads' removal takes with it beyond their driver calls:
	 * the library's own work around each read, from the stage-2 run's CPU samples
	 * (analysis/cputime.c), summed over the removed reads. */
	uint64_t read_lib_cpu_ns;
	/* Wait time stage 2's probes hid at the sites a fix removes syncs from (analysis/hidden.c):
	 * per site the smaller of its probe span and its longer baseline wait, times its syncs;
	 * and the part the removed syncs take along (their benefits include it). */
	uint64_t hidden_wait_ns, hidden_removed_ns;
	/* Removed syncs after which the GPU idled only until their thread's next submission (it
	 * ran through the stretch before each: analysis/hidden.c); their benefits are at most
	 * that idle time. */
	uint64_t gpu_idle_syncs;
	uint32_t baseline_runs; /* the stage-1 runs that baseline was read from */
	/* Own time of the duplicate copies that their price over the runs that timed them takes
	 * off the timeline's, or adds to it (analysis/dupcost.c): their benefits are that much
	 * less, or more. The most runs one site's price rests on, the timeline's included. */
	uint64_t dup_trimmed_ns, dup_added_ns;
	uint32_t dup_price_runs;
	/* Pricing a fix's work (analysis/price.c): whether the timeline run's driver has a node
	 * model; the calls whose fix deletes work priced with it, and that work; the calls a rule
	 * wanted to price but could not (no model, or no figure for them): priced by their wait. */
	bool node_model;
	uint64_t priced_calls, priced_deleted_ns, unpriced_calls;
};

struct ffm_analysis_result {
	const char *key;
	struct ffm_an_run *runs; /* every run of the key considered, id order */
	size_t n_runs;
	int64_t run_baseline, run_timeline, run_verdicts, run_first_use; /* 0 = none */
	int64_t run_profile; /* the run the sites' times come from */
	bool sampled;        /* ... which was sampled (adaptive stage 1): see ffm_an_site.sampled */
	bool have_problems; /* stage 3 verdicts exist for the timeline */
	uint64_t wall_ns;   /* the timeline's (process span), else the baseline's wall_s */
	struct ffm_totals totals;
	uint64_t events;	  /* timeline events scanned */
	uint64_t modelled_events; /* ... that the model needs (see keep_site in timeline.c) */
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
	unsigned read_every; /* host reads: the fix reads every this many iterations */
};

/* Where a long analysis is, for a progress display: written by the analysis, read by another
 * thread at any time. */
struct ffm_an_progress {
	_Atomic(const char *) phase; /* what it does now ("reading the timeline"); NULL: not begun */
	_Atomic uint64_t done;	     /* what the phase has read so far (events, verdicts) */
	_Atomic uint64_t total;	     /* timeline events to read (0: not known) */
};

struct ffm_analysis_opts {
	size_t sz;
	const char *job_id; /* runs of the key up to this job's last run; NULL = all runs */
	bool job_only;	    /* only this job's runs */
	enum ffm_grouping grouping;
	bool keep_graph;    /* keep the model's graph for ffm_analysis__subsequence() */
	unsigned scan_threads; /* timeline read in this many parallel slices; 0 = by size/CPUs */
	int profile_stage;     /* sites' times from this stage's run (1 or 2); 0 = 2, else 1 */
	bool event_verdicts;   /* keep each event's verdict for ffm_analysis__event_verdict() */
	unsigned read_every;   /* host reads: the fix reads every N iterations (0: default) */
	/* fnmatch(3) patterns (no FNM_PATHNAME) of the Python files that are installed libraries,
	 * NULL-terminated; NULL = those of the environment's FFM_PY_LIBRARY (':' between them),
	 * else ffm_an_py_library_default (analysis/pyframes.c) */
	const char *const *py_library;
	/* The same for native source files (headers of the toolkit and of the standard library):
	 * FFM_SRC_LIBRARY, else ffm_an_src_library_default */
	const char *const *src_library;
	struct ffm_an_progress *progress; /* NULL: none kept */
};

/* Library code (analysis/pyframes.c): a stored frame of Python code; a file of an installed
 * Python library; a native source file of the toolkit's or the standard library's headers.
 * A call site is named by its first frame outside them. */
extern const char *const ffm_an_py_library_default[];
extern const char *const ffm_an_src_library_default[];
bool ffm_an_py_frame(const struct ffm_store_frame *f);
bool ffm_an_py_library(const char *file, const char *const *patterns);
bool ffm_an_src_library(const char *file, const char *const *patterns);
/* How well a native frame names a place in the user's code: outside NVIDIA's libraries first,
 * then at a line of the user's own source, then at any line; the first frame of a stack with
 * the highest rank names it. FFM_AN_RANK_USER_LINE: the best there is. */
#define FFM_AN_RANK_USER_LINE 7
int ffm_an_frame_rank(const struct ffm_store_frame *f, const char *const *src_library);
/* Whether @func (a symbol) is the host function nvcc generates for a kernel, the caller of the
 * launch stub @inner (demangled: `__device_stub__<k>(params)`): `_<k>` (a mangled name) or
 * `<k>`. Its line is the kernel's definition; the launch, `k<<<...>>>(...)`, is the frame that
 * calls it. */
bool ffm_an_nvcc_kernel_wrapper(const char *inner, const char *func);

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

/*
 * Store the results in @s (ffm_store__put_results: the job's previous results replaced), tagged
 * with @tool_version and the time: for the store's writer (ffmd at a job's end, ffmctl profile)
 * with an analysis of opts->job_id; -EINVAL without one, store errors, -ENOMEM.
 */
int ffm_analysis__save(const struct ffm_analysis *a, struct ffm_store *s, const char *tool_version,
		       int64_t *ret_id);

/* Analyse job @job_id as its report does (default options) and save the results in @s; the
 * headline also in *head (may be NULL; its job_id and strings are not set). */
int ffm_analysis__store_job(struct ffm_store *s, const char *job_id, const char *tool_version,
			    struct ffm_store_analysis *head);

const char *ffm_an_problem_name(unsigned problem); /* "unnecessary_sync", ... */
const char *ffm_an_grouping_name(enum ffm_grouping g); /* "point", "function", "sequence" */
/* The type that names a group, by @n_type[enum ffm_problem]: a host read where there is one, a
 * duplicate transfer where at least half as many as the most frequent type (the fix deletes
 * the copy, and the sync problem of its wait with it), else the most frequent (NONE: none). */
unsigned ffm_an_main_problem(const uint64_t *n_type);
/* A site's most frequent problem type. */
unsigned ffm_an_site_problem(const struct ffm_an_site *x);

/*
 * The verdict of one recorded event of the store (opts->event_verdicts), the same the report
 * counts:
 *   - an event of the timeline run: the verdict applied to it (or none: no problem);
 *   - an event of the stage-3 or stage-4 run used: the verdict of its own rows, under its call
 *     site's decisions (misplaced, seen used);
 *   - an event of any other run (stage 1, older runs), or one of stage 3/4 without rows:
 *     its call site's, when every occurrence of the site that got a verdict in the timeline
 *     got the same problem (site_wide).
 */
struct ffm_an_event_verdict {
	unsigned problem;	 /* enum ffm_problem; NONE: no problem */
	bool duplicate;		 /* (also) a duplicate transfer: then problem may be a sync's */
	bool site_wide;		 /* from the call site (see above) */
	bool partial;		 /* only part of the protected data was watched */
	int64_t use_delay_ns;	 /* misplaced: the first-use delay, else -1 */
	int64_t first_event;	 /* duplicate in a stage-3 run: the first transfer, else 0 */
	int64_t from_run;	 /* the stage-3/4 run whose data decided it */
	uint64_t checked;	 /* site_wide: the site's occurrences with a verdict */
};

/* 0 (out->problem NONE and !out->duplicate: no problem); -EINVAL without event_verdicts. */
int ffm_analysis__event_verdict(const struct ffm_analysis *a, const struct ffm_store_event *ev,
				struct ffm_an_event_verdict *out);

/* ---- the GPU work of a run (analysis/gpu.c) ---------------------------------------------- */

/* A span on the GPU track of (tgid, stream). */
struct ffm_an_gpu_span {
	uint32_t tgid;
	uint64_t stream;     /* the calls' stream handle, 0 = default / none given */
	uint64_t start_ns, end_ns;
	uint64_t launched_ns; /* the first call's start (start_ns may be later: the track was busy) */
	uint32_t calls;	     /* calls whose work it holds */
	int64_t first_event; /* the first of them */
	int64_t ended_by;    /* the event whose wait ended it (a measured copy: itself), 0: the
			      * process's exit */
	uint64_t bytes;	     /* measured copy or memset: its size */
	bool inferred;	     /* an upper bound from the waits (else measured) */
	uint64_t kernel;     /* the first launch's kernel handle (ffm_an_kernels__name), 0: none */
	bool other_kernels;  /* launches of other kernels are in it too */
};

/* A call that handed work to the GPU, and the wait (of the same process) that ended it. */
struct ffm_an_gpu_flow {
	uint32_t tgid;
	int64_t from_event, to_event;
	uint64_t from_ns, to_ns; /* the two calls' starts */
	uint32_t from_tid, to_tid;
};

typedef int (*ffm_an_gpu_span_cb)(const struct ffm_an_gpu_span *s, void *ctx);
typedef int (*ffm_an_gpu_flow_cb)(const struct ffm_an_gpu_flow *f, void *ctx);
struct ffm_an_gpu;

/* A tracker; callbacks may be NULL; a nonzero return of one is returned by the call that made
 * it. */
int ffm_an_gpu__new(ffm_an_gpu_span_cb on_span, ffm_an_gpu_flow_cb on_flow, void *ctx,
		    struct ffm_an_gpu **ret);
/* Feed one run's events in (start_ns, id) order; @api: the event's API name (NULL: none). */
int ffm_an_gpu__event(struct ffm_an_gpu *g, const struct ffm_store_event *ev, const char *api);
/* After the run's events: work of @tgid no wait ended is bounded by its exit at @end_ns (0:
 * unknown, the work is left out). */
int ffm_an_gpu__process_end(struct ffm_an_gpu *g, uint32_t tgid, uint64_t end_ns);
/* The kernel names of a run (store table kernels), demangled, by (process, handle). */
struct ffm_an_kernels;
int ffm_an_kernels__load(struct ffm_store *s, int64_t run, struct ffm_an_kernels **ret);
/* The name of kernel @handle of process @tgid, NULL when the program's getter did not name it. */
const char *ffm_an_kernels__name(const struct ffm_an_kernels *k, uint32_t tgid, uint64_t handle);
struct ffm_an_kernels *ffm_an_kernels__free(struct ffm_an_kernels *k);
/* Forget every track (before the next run). */
void ffm_an_gpu__reset(struct ffm_an_gpu *g);
struct ffm_an_gpu *ffm_an_gpu__free(struct ffm_an_gpu *g);

/* ---- several nodes (one store each) of one job ------------------------------------------- */

/* A problem group merged over nodes (by its key: call-site identity, function, pattern). */
struct ffm_an_mgroup {
	struct ffm_an_group g; /* sums; site and seq_sites refer to node `node` */
	size_t node;
	uint32_t nodes;	       /* on how many nodes */
};

struct ffm_an_merged {
	struct ffm_an_mgroup *groups; /* by benefit, largest first */
	size_t n_groups;
	struct ffm_an_api *apis;      /* summed by name, by time waited, largest first */
	size_t n_apis;
	uint64_t rec_ns, wall_sum_ns, wall_max_ns;
	double imbalance;      /* max/mean - 1 of recoverable time over nodes, -1 = one node */
	double proc_imbalance; /* the same over processes */
	size_t n_procs;
	bool have_problems;
	uint32_t stages_done; /* bit s: some node has an ended run of stage s */
	struct ffm_an_quality q;
};

/* Merge the results of @n nodes (same grouping). 0 or -ENOMEM; free with _merged_free. */
int ffm_an_merge(const struct ffm_analysis_result *const *r, size_t n, struct ffm_an_merged *m);
void ffm_an_merged_free(struct ffm_an_merged *m);

/* ---- two jobs: predicted vs measured, per call site -------------------------------------- */

struct ffm_an_diff_row {
	uint64_t key;			/* the site's identity */
	const struct ffm_an_site *site; /* for names: before's if any, else after's */
	uint64_t predicted_ns, before_ns, after_ns, n_before, n_after;
};

/*
 * Rows of call sites by identity, by predicted benefit (largest first): @pred are the before
 * job's full analyses (its report: benefit of fixing each site alone), @before and @after the
 * analyses whose profile run measures each side (stage 2: time in the calls, else time waited),
 * @nb / @na nodes each. 0 or -ENOMEM; *rows is malloc'd.
 */
int ffm_an_compare(const struct ffm_analysis_result *const *pred,
		   const struct ffm_analysis_result *const *before, size_t nb,
		   const struct ffm_analysis_result *const *after, size_t na, int stage,
		   struct ffm_an_diff_row **rows, size_t *n);

#endif
