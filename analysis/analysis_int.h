/* SPDX-License-Identifier: MIT */
/*
 * What the analysis's files share (not part of its interface; see ffm_analysis.h): the types
 * each pass takes as its input and writes as its output, and the passes themselves. Only
 * analysis.c holds struct ffm_analysis and hands each pass its parts (docs/DESIGN.md, "The
 * analysis's passes"). Memory: the event array (sized before the scan) and the model's graph
 * dominate; everything else is per call site or per problem, never per event.
 */
#ifndef FFM_ANALYSIS_INT_H
#define FFM_ANALYSIS_INT_H

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ffm_analysis.h"
#include "bpf/ffm_hash.h"
#include "common/oatab.h"
#include "common/util.h"

/* ---- small helpers (util.c) --------------------------------------------------------------- */

/* All strings the results point to; freed with the analysis. */
struct strpool {
	char **v;
	size_t n, cap;
};

/* A copy of @s in the pool; @dflt itself for NULL or ""; NULL when out of memory. */
const char *an_pool_dup(struct strpool *p, const char *s, const char *dflt);
void an_pool_fini(struct strpool *p);
/* The median of @v (sorted in place), -1 for none. */
int64_t an_median_i64(int64_t *v, size_t n);
/* The mean of v[] without its lowest and highest hundredth (sorts v); -1 when empty. */
int64_t an_trimmed_mean_i64(int64_t *v, size_t n);

/* A call's own time: its duration outside its waits. */
static inline uint64_t an_own_ns(uint64_t dur_ns, uint64_t wait_ns)
{
	return dur_ns > wait_ns ? dur_ns - wait_ns : 0;
}

/* The most stage-1 runs the baseline reads (an_baseline_runs()). */
#define AN_BASELINE_RUNS 8

/* A growable array of samples, for medians (analysis/hidden.c, analysis/dupcost.c). */
struct an_i64s {
	int64_t *v;
	size_t n, cap;
};

/* @x at the end of @s. 0 or -ENOMEM. */
int an_i64s_push(struct an_i64s *s, int64_t x);

static inline uint64_t an_str_hash(const char *s)
{
	return ffm_fnv1a(FFM_FNV1A_INIT, s ? s : "", s ? strlen(s) : 0);
}

/* ---- state -------------------------------------------------------------------------------- */

/* Per-occurrence verdicts of one stack from one run, in occurrence order. */
struct verdicts {
	uint8_t *v;	/* enum ffm_seen (sync) or enum ffm_dup_kind (transfers) */
	int64_t *delay; /* sync: first-use delay, -1 = none */
	int64_t *event; /* the rows' event ids (opts.event_verdicts only) */
	size_t n, cap;
	int64_t last_event;
	/* majority verdict when the counts do not match the timeline's */
	bool majority;
	uint8_t maj_v;
	int64_t maj_delay;
};

/* A sync occurrence: its wait, the probe cost its thread paid since its first GPU
 * submission after the previous sync, and the thread's CPU time since its previous
 * occurrence at the same site key (-1: the first on this thread). */
struct an_sync_obs {
	int64_t wait_ns, span_ns, cpu_ns;
};

/* A site key's latest sync occurrence on one thread: its end, and the thread's waits until
 * then (0, 0: none yet). */
struct an_sync_last {
	struct oa_key k; /* (site key, tid) */
	uint64_t end, wsum;
};

struct site_int {
	struct verdicts s3, s4, x3; /* stage 3 syncs, stage 4 syncs, stage 3 transfers */
	uint64_t n2;		    /* timeline occurrences (stack_agg) */
	uint64_t seen;		    /* ... scanned so far */
	bool keep;		    /* its events go into the model (see keep_site(), timeline.c) */
	bool misplaced;		    /* its used syncs are misplaced (ffm_verdict_site_misplaced) */
	int64_t site_delay;	    /* ... by this median first-use delay (-1: not misplaced) */
	bool any_used3;		    /* stage 3 saw a use after at least one of its syncs */
	bool host_read;		    /* a small read every iteration (ffm_verdict_site_host_read) */
	bool explicit_sync;	    /* its driver function is a cu*Synchronize */
	bool launch_api;	    /* ... a cuLaunch* */
	bool setup_api;		    /* ... sets the program up or takes it down (sites.c) */
	bool stream_scoped;	    /* its waits wait for one stream (a stream sync, a copy, a memset) */
	bool async_copy;	    /* ... a cuMemcpy*Async (one that waits copies pageable memory) */
	uint64_t prot_cur, prot_max; /* bytes protected by its latest / largest stage-3 sync */
	int64_t use_stack, use_frame;
	int64_t first_stack;
	int64_t *delays; /* applied first-use delays of misplaced/used occurrences, for the median */
	size_t n_delays, cap_delays;
	uint64_t py_anchor; /* its user's Python frame and callers (an_py_anchor_frame), 0: none */
	/* Its sync occurrences in the timeline (analysis/hidden.c) */
	struct an_sync_obs *obs;
	size_t n_obs, cap_obs;
	uint64_t n_removed; /* occurrences a fix removes (unnecessary sync, host read) */
	uint64_t hidden_ns; /* wait per removed occurrence that stage 2's probes hid */
	/* the GPU ran through the stretches before its waits (hidden.c): busy from the thread's
	 * first submission after the previous sync until each wait ended */
	bool ran_through;
	/* a host read that takes its line's copy along, waits and all (events.c, removed_cpu):
	 * 1 + that copy's site, whose waits in the baseline count as the read's; 0: none */
	uint32_t copy_site;
};

struct thread {
	uint32_t tid, tgid;
	uint64_t call_end; /* end of the latest API call on this thread (nested wait events) */
	size_t last_ev;	   /* 1 + index in ev[] of its latest model event, 0: none yet */
	uint32_t last_site; /* that event's site */
	uint64_t sub_probe; /* probe cost at its first submission since its last sync, 0: none */
	uint64_t wait_end;  /* where its latest wait ended */
	size_t idle_ev;	    /* 1 + index in ev[] of its latest removed sync before its next
			     * submission (whose gpu_idle_ns that sets), 0: none */
	/* idle_ev a host read: its first-use delay (-1: none timed) and its site */
	int64_t read_use_ns;
	uint32_t read_site;
	uint64_t wait_sum;  /* the waits of its events so far */
	/* its latest sync occurrence noted for hidden.c: the event (as last_ev; its site is then
	 * last_site) and the index in that site's obs */
	size_t obs_ev;
	size_t obs_idx;
};

/* The two threads whose events end latest, latest first, with the end of each one's last
 * event (dropped events included): whether another thread than one still calls the driver
 * after a time (analysis/bound.c, tail_after). */
struct an_late {
	uint64_t end[2];
	uint32_t tid[2];
};

/* A wait on one stream: that stream's work was running from start to end. */
struct busy {
	uint64_t stream; /* key: process, stream handle, thread for the per-thread stream */
	uint64_t start, end;
	uint32_t tgid, tid; /* who waited */
	uint32_t ev;	    /* the waiting event's index in tl.ev (its tl.deleted work); UINT32_MAX:
			     * the stream's first work, no wait */
	bool required;	    /* the wait is kept by every fix (no problem of its own) */
};

struct seq_ref {
	struct ffm_group g; /* the model's sequence */
	uint32_t pattern;   /* index into res.groups before sorting -> pattern_of[] */
	uint32_t period;    /* members repeat with this period, reps times, then a tail; 0: no */
	uint32_t reps;
	uint32_t first;     /* its first member's index among the problem nodes */
};

/* The sequences of --group sequence, kept with the graph for ffm_analysis__subsequence(). */
struct an_seqs {
	struct seq_ref *v;
	size_t n;
	uint64_t *pattern_key; /* pattern index (creation order) -> merge key */
};

/* One event's verdict (opts.event_verdicts), looked up by (run, event). */
struct an_evv {
	int64_t run, event;
	int64_t delay;	     /* sync: first-use delay, -1 none */
	int64_t first_event; /* duplicate rows: the first transfer */
	uint32_t si;	     /* its site (index into the catalog's si) */
	uint8_t what;	     /* timeline: enum ffm_problem; stage 3/4: enum ffm_seen / ffm_dup_kind */
	bool sync;	     /* a sync row (else a transfer row) */
	bool dup;	     /* timeline: also a duplicate transfer */
};
/* The event verdicts (opts.event_verdicts), sorted by (run, event) once complete. */
struct an_evvs {
	struct an_evv *v;
	size_t n, cap;
};

/* The model's input, from the timeline scan and the verdicts applied to its events (timeline.c,
 * events.c): read by the graph, the model, the grouping and the stream bound. */
struct an_timeline {
	struct ffm_event *ev; /* in time order */
	size_t n_ev, cap_ev;
	struct thread *thr;   /* every thread seen, in order of first event */
	size_t n_thr, cap_thr;
	struct oatab thr_of;  /* tid -> index in thr */
	struct busy *busy;    /* waits on one stream, and each stream's first work (empty) */
	size_t n_busy, cap_busy;
	uint64_t run_start_ns; /* the timeline run's start (its processes' first), for the bound */
	uint64_t run_end_ns;   /* ... and its end (its processes' last) */
	struct an_late late;   /* the timeline's threads that called the driver last */
	struct oatab deleted;  /* event index -> work its fix deletes, ns (analysis/price.c) */
	struct oatab streams;  /* stream key -> 1: its first work is in busy */
};

/* opts.progress, where the caller keeps one: the phase begun (its counts start at 0), what it
 * has read and will read. */
static inline void an_phase(struct ffm_an_progress *p, const char *phase)
{
	if (p) {
		atomic_store(&p->done, 0);
		atomic_store(&p->total, 0);
		atomic_store(&p->phase, phase);
	}
}

static inline void an_progress_add(struct ffm_an_progress *p, uint64_t done, uint64_t total)
{
	if (p) {
		atomic_fetch_add(&p->done, done);
		atomic_fetch_add(&p->total, total);
	}
}

/* ---- the store: runs, API names, call sites (runs.c, sites.c) ------------------------------ */

/* The driver functions and call sites the passes meet, each created on first use (runs.c,
 * sites.c): res->apis and res->sites (nothing else of res), with the analysis's per-site state. */
struct an_catalog {
	struct ffm_store *s;
	const struct ffm_analysis_opts *o; /* py_library, src_library */
	struct strpool *pool;
	struct ffm_analysis_result *res;
	struct oatab site_of; /* store stack id -> site index (u32 map) */
	struct site_int *si;  /* parallel to res->sites until they are sorted, then in the old order */
	size_t cap_sites;
	struct oatab api_of; /* api id -> index in res->apis */
	size_t cap_apis;
	struct oatab fold_of; /* folded-name hash -> fold id */
	uint32_t n_folds;
};
/* The per-site array and the maps (what the passes keep in each site_int is theirs to free). */
void an_catalog_fini(struct an_catalog *cat);

/* The runs of the key as opts select them into res->runs (in id order), the roles
 * (res->run_baseline ...) and their drop and failure counts in res->q. */
int an_load_runs(struct ffm_store *s, const struct ffm_analysis_opts *o,
		 struct ffm_analysis_result *res);
struct ffm_an_api *an_api_slot(struct an_catalog *cat, uint32_t api);
int an_on_api_name(uint32_t api, const char *name, void *ctx); /* ctx: the catalog */
/* The site of @stack, created (and described from its frames) on first use. */
int an_site_for(struct an_catalog *cat, int64_t stack, uint32_t api, uint32_t kind,
		uint32_t *ret);
/* The kernels run @run's launch sites launched, by name (ffm_an_site.kernel). */
int an_site_kernels(struct an_catalog *cat, int64_t run);
int an_on_agg(const struct ffm_store_stack_agg *g, void *ctx); /* ctx: the catalog */
/* The sites of sampled run @run get estimates for the spans it sampled (sampled.c); *sampled
 * once they have. */
int an_apply_samples(struct ffm_store *s, int64_t run, const struct oatab *site_of,
		     struct ffm_an_site *sites, bool *sampled);

/* ---- applying the verdicts (events.c, verdicts.c, hidden.c, dupcost.c) -------------------- */

/* What the pass "apply verdicts" works on: what it reads, then what it writes. */
struct an_apply_ctx {
	struct ffm_store *s;
	const struct ffm_analysis_opts *o; /* read_every, event_verdicts, progress */
	const struct an_cpu *cpu;	   /* CPU time per Python anchor */
	const struct an_baseline *base;	   /* the baseline's runs */
	struct an_catalog *cat;		   /* the sites' counts and verdict notes; new sites */
	struct ffm_analysis_result *res;   /* q, modelled_events, the processes' threads */
	struct an_timeline *tl;		   /* the model's events, threads and busy streams */
	struct an_evvs *evv;		   /* event verdicts (opts.event_verdicts) */
	struct oatab sync_last; /* (site key, tid) -> struct an_sync_last (hidden.c), its own */
};


int an_load_verdicts(struct an_apply_ctx *a);
void an_verdicts_fini(struct verdicts *v);
/* The verdict for occurrence k of a site's n2 timeline occurrences. */
bool an_verdict_at(const struct verdicts *v, uint64_t k, uint64_t n2, uint8_t *val,
		   int64_t *delay);
/* Event verdicts (lookup.c): one more; sorted for lookups once the analysis is done. */
int an_evv_add(struct an_evvs *evv, const struct an_evv *e);
int an_evv_sort(struct an_evvs *evv);
/* ffm_analysis__event_verdict() of @ev from the sorted verdicts and the sites. */
void an_event_verdict(const struct an_evvs *evv, const struct an_catalog *cat,
		      const struct ffm_store_event *ev, struct ffm_an_event_verdict *out);

/* ---- the timeline and the model's input (timeline.c, events.c) ----------------------------- */

/* The site key (ffm_an_site.key) of @stack with driver function @api, without a site. */
int an_site_key(struct an_catalog *cat, int64_t stack, uint32_t api, uint64_t *key);
/* Another run's events by site key: each of its (stack, api) pairs keyed once. */
struct an_key_cache {
	struct oatab stacks; /* (stack, api) -> site key */
};
#define AN_KEY_CACHE_INIT { .stacks = OATAB_INIT(struct an_stack_key) }
struct an_stack_key {
	struct oa_key k; /* (stack, api) */
	uint64_t key;
};
/* The site key of @ev through @c; 0 for an event without stack or API. */
int an_event_key(struct an_catalog *cat, struct an_key_cache *c, const struct ffm_store_event *ev,
		 uint64_t *key);
void an_key_cache_fini(struct an_key_cache *c);
/* Every event of @run with the timing columns only, in time order, to @fn (non-zero stops). */
int an_scan_run(struct ffm_store *s, int64_t run,
		int (*fn)(const struct ffm_store_event *ev, void *ctx), void *ctx);
/* The stage-1 runs that stand for the program as the timeline sees it, newest first, at most
 * AN_BASELINE_RUNS: ended whole, not failed, not sampled, and after a re-trace for drift none
 * from before the run that saw it (analysis/runs.c; n 0: none is usable). */
struct an_baseline {
	int64_t id[AN_BASELINE_RUNS];
	size_t n;
};
void an_choose_baseline(struct ffm_store *s, const struct ffm_analysis_result *res,
			struct an_baseline *out);
/* Run @id's enum ffm_run_flags among @runs (in id order; 0 for a run not among them). */
uint32_t an_run_flags(const struct ffm_an_run *runs, size_t n, int64_t id);
/* The waits stage 2's probes hid at the sites a fix removes, added to what the removal takes
 * along (analysis/hidden.c). After the scan, before the graph. */
int an_hidden_waits(struct an_apply_ctx *a);
/* A sync occurrence of site @site on thread @t (whose wait_sum counts its wait already) ending
 * at @end, with its probe span, for an_hidden_waits(). With @copy (a host read that takes its
 * copy along: site_int.copy_site) the copy's occurrence just before, if it was a sync, becomes
 * part of this one: its wait and span added, its own left out. */
int an_note_sync(struct an_apply_ctx *a, uint32_t site, struct thread *t, uint64_t end,
		 uint64_t wait_ns, uint64_t probe_span_ns, bool copy);
/* The duplicate copies' own time, from the lower of the timeline's and the first-use run's
 * medians per site (analysis/dupcost.c). After the scan, before the graph. */
int an_dup_cost(struct an_apply_ctx *a);

/* ---- CPU samples (cputime.c) -------------------------------------------------------------- */

/* The Python frames from a stack's first one outside the installed libraries outward, hashed:
 * the user's line and its callers. Fed every frame of a stack, innermost first. */
struct an_py_anchor {
	uint64_t h; /* 0: no user frame yet */
	bool on;
	const char *const *py_library;
};
void an_py_anchor_frame(struct an_py_anchor *p, const struct ffm_store_frame *f,
			const char *const *py_library);
/* CPU time sampled per Python anchor, outside driver calls. */
struct an_cpu {
	struct oatab of; /* anchor -> index in ns[] */
	uint64_t *ns;
	size_t n, cap;
};
#define AN_CPU_INIT { .of = OATAB_U32_INIT }
/* The CPU samples of run @run (the timeline, 0: none) outside driver calls, summed per anchor
 * into *out (AN_CPU_INIT before; an_cpu_fini after). */
int an_load_cpu_samples(struct ffm_store *s, const char *const *py_library, int64_t run,
			struct an_cpu *out);
/* ... for one anchor (0: none). */
uint64_t an_cpu_at(const struct an_cpu *c, uint64_t anchor);
void an_cpu_fini(struct an_cpu *c);

/* A timeline event as the scan hands it over (the store's columns the model's event needs). */
struct an_raw {
	uint64_t start_ns, dur_ns;
	uint64_t wait_ns;      /* its wait: a wait record's whole duration */
	int64_t stack;	       /* the store's stack id */
	int64_t event;	       /* the store's event id */
	uint64_t stream;       /* the call's stream argument (0: none) */
	uint64_t probe_ns;     /* the probes' cost to its thread before the call */
	uint64_t sub_probe_ns; /* probe_ns of its thread's first launch left out of the model since
				* its previous event handed over, 0: none */
	uint64_t sub_start_ns; /* ... that launch's start, 0: none */
	uint32_t tid, tgid;
	uint32_t api;	       /* the driver function's id */
	uint32_t kind;	       /* the store's enum ffm_event_kind */
};
struct ffm_an_proc *an_proc_of(struct ffm_analysis_result *res, uint32_t tgid);

/* ---- the passes, in the order analysis.c runs them (docs/DESIGN.md) ------------------------ */

/* Load runs and sites (load.c). In: cat's store and options. Out: cat->res's key, runs, roles,
 * run counts in q, wall time without a timeline; the catalog's apis and profile sites. */
int an_load_runs_and_sites(struct an_catalog *cat);
/* Whether the profile run is the timeline (the scan and the model run). */
bool an_has_timeline(const struct ffm_analysis_result *res);

/* Scan the timeline (timeline.c): every kept event of the timeline run to @sink, in time
 * order. */
struct an_scan_sink {
	/* once, while the slices start reading: @expected events will be handed over */
	int (*start)(void *ctx, uint64_t expected);
	int (*event)(void *ctx, const struct an_raw *raw); /* non-zero stops the scan */
	void *ctx;
};
struct an_scan_in {
	struct ffm_store *s;
	unsigned scan_threads;		  /* opts.scan_threads */
	struct ffm_an_progress *progress; /* opts.progress */
	int64_t run;			  /* the timeline run */
	const struct ffm_an_run *runs;	  /* res.runs */
	size_t n_runs;
	const struct ffm_an_site *sites;  /* res.sites */
	size_t n_sites;
};
struct an_scan_out {
	struct site_int *si;		  /* parallel to sites: reads n2, writes keep */
	struct strpool *pool;
	struct ffm_analysis_result *res;  /* writes procs, n_procs, events */
	struct an_timeline *tl;		  /* writes run_start_ns, run_end_ns, late */
};
int an_scan_timeline(const struct an_scan_in *in, const struct an_scan_sink *sink,
		     struct an_scan_out *out);

/* Apply verdicts (events.c, verdicts.c, hidden.c, dupcost.c): the scan's events into tl
 * with stage 3/4's verdict of each occurrence; then what the probes hid and what the
 * duplicate copies cost (an_apply_finish). In and out: struct an_apply_ctx. */
struct an_apply {
	struct an_apply_ctx *a;
	int64_t last_stack; /* the previous event's stack and site */
	uint32_t last_site;
};
struct an_scan_sink an_apply_sink(struct an_apply *ap, struct an_apply_ctx *a);
int an_apply_finish(struct an_apply_ctx *a);
void an_apply_fini(struct an_apply_ctx *a);

/* Build the graph (graph.c) of the timeline's events. */
/* Price the fix's work (price.c): per problem event of tl, the work its fix deletes into
 * *deleted (event index -> ns); q's pricing counts. */
struct an_price_in {
	struct ffm_store *s;
	int64_t run;			  /* the timeline run: its driver's model, its threads */
	const struct an_timeline *tl;
	const struct oatab *site_of;	  /* stack id -> site */
	const struct ffm_an_site *sites; /* res.sites */
	const struct site_int *si;	  /* parallel to sites */
};
int an_price(const struct an_price_in *in, struct oatab *deleted, struct ffm_an_quality *q);

/* Price a temporary buffer's reuse (reuse.c): per thread, allocations paired with the frees of
 * their addresses, repeated step after step, priced by rule (c) of stages/ffm_price.h; each
 * set's allocations in tl become FFM_PROBLEM_TEMP_BUFFER with the saving in tl->deleted;
 * q's pricing counts. */
struct an_reuse_in {
	struct ffm_store *s;
	int64_t run;			 /* the timeline run: its allocations, frees, memsets */
	const struct oatab *site_of;	 /* stack id -> site */
	const struct ffm_an_site *sites; /* res.sites */
	size_t n_sites;
};
int an_reuse(const struct an_reuse_in *in, struct an_timeline *tl, struct ffm_an_quality *q);

/* The pairing, call by call in time order (table-tested: tests/analysis/test_reuse.c). */
#define AN_REUSE_MIN_PAIRS 2 /* a set repeats: at least two steps */
struct an_reuse_call {
	uint32_t tid;
	uint8_t kind;	 /* FFM_CALL_ALLOC, FFM_CALL_FREE or FFM_CALL_MEMSET */
	int64_t stack;
	uint64_t addr;	 /* allocation: the pointer it gave; free, memset: their destination */
	uint64_t bytes;
	uint64_t own_ns; /* its time outside its waits */
	uint32_t api;
};
/* Pairs of one thread, allocation site, free site and size whose buffer lived within one step
 * (no allocation of its site between its allocation and its free). */
struct an_reuse_set {
	uint32_t tid;
	uint32_t alloc_api;
	int64_t alloc_stack, free_stack;
	uint64_t bytes;
	uint64_t pairs;
	uint64_t alloc_ns, free_ns;	       /* the pairs' own times, summed */
	uint64_t first_alloc_ns, first_free_ns; /* ... the first pair's (the buffer that stays) */
	uint64_t fills, fill_ns, fill_bytes; /* memsets of the buffers between, summed */
};
struct an_reuse_find {
	struct oatab live, seq, sets, last;
};
void an_reuse_find_init(struct an_reuse_find *f);
void an_reuse_find_fini(struct an_reuse_find *f);
int an_reuse_find_call(struct an_reuse_find *f, const struct an_reuse_call *c);
/* The sets of AN_REUSE_MIN_PAIRS pairs or more, one a call (*i from 0); NULL after the last. */
const struct an_reuse_set *an_reuse_find_next(const struct an_reuse_find *f, size_t *i);
struct ffm_price;
/* Rule (c) over one set at its recorded times; @managed: its buffers are managed memory. */
int an_reuse_price(const struct an_reuse_set *s, bool managed, struct ffm_price *p);

struct ffm_node_model;
/* The node model stored with @run's driver; false when there is none. */
bool an_load_node_model(struct ffm_store *s, int64_t run, struct ffm_node_model *nm);

/* A managed memset's fix (managed.c), after an_reuse: per occurrence of a memset of managed
 * memory whose pages the host touched after it (stage 4's count), the work its fix deletes into
 * *deleted and its faults into the event's removed_ns; the occurrence becomes an unnecessary
 * sync. */
struct an_managed_in {
	struct ffm_store *s;
	int64_t run;			  /* the timeline run: its driver's model */
	int64_t run_faults;		  /* the stage-4 run that counted the faults; 0: none */
	struct an_timeline *tl;		  /* its events' problems and removed_ns change */
	const struct oatab *site_of;	  /* stack id -> site */
	struct ffm_an_site *sites;	  /* res.sites: read; .managed_fix set where it applies */
	struct oatab *deleted;		  /* event index -> ns (tl->deleted) */
};
/* One call site as the rule sees it: its stage-2 totals and stage 4's counts. */
struct an_managed_site {
	uint32_t kind;		/* enum ffm_event_kind */
	uint64_t calls, bytes;	/* stage 2: its calls and their bytes */
	uint64_t ops, faults;	/* stage 4: its operations on managed memory, the faults after */
};
struct ffm_price_call;
struct ffm_node_model;
/* Whether occurrence @e of site @x is the pattern; its call to price (rule (a)) into *out, with
 * the pages the host faulted back (its faults times the pages @nm says a fault brings back, at
 * most the buffer) and the bytes that migrate with them (@nm NULL or without a page size:
 * all). @alone: its thread had no other GPU work in flight, so its wait is its own work. */
bool an_managed_rule(const struct an_managed_site *x, const struct ffm_event *e, bool alone,
		     const struct ffm_node_model *nm, struct ffm_price_call *out);
int an_managed(const struct an_managed_in *in, struct ffm_an_quality *q);
int an_build_graph(const struct an_timeline *tl, struct ffm_graph **g);

/* Run the model (model.c): each problem node's benefit; per site its problem counts and point
 * benefit, per process and driver function what fixing their problems saves. */
struct an_model_in {
	const struct ffm_graph *g;
	const struct an_timeline *tl;
	const struct oatab *site_of; /* stack id -> site */
	const struct oatab *api_of;  /* api id -> index in res.apis */
};
/* The problem nodes in the graph's order: each one's site and problem type. */
#define AN_NODE_SPLIT 0x80u /* in prob: the sync half of a split duplicate, a second problem */
#define AN_NODE_COND 0x40u  /* in prob: a conditional host read, in no total */
#define AN_NODE_TYPE(p) ((p) & ~(AN_NODE_SPLIT | AN_NODE_COND))
struct an_nodes {
	uint32_t *site;
	uint8_t *prob;
	size_t n;
};
struct an_model_out {
	struct an_nodes nodes;
	struct ffm_group *points; /* the model's point groups (one per site with problems) */
	size_t n_points;
};
int an_run_model(const struct an_model_in *in, struct ffm_analysis_result *res,
		 struct an_model_out *out);
void an_model_out_fini(struct an_model_out *out);
/* The model over bucket b's nodes into out[b] (n[b]: how many; optional): a node goes to the
 * bucket of its site (@site_bucket, UINT32_MAX: none). */
int an_bucket_benefits(const struct ffm_graph *g, const struct an_nodes *nodes,
		       const uint32_t *site_bucket, size_t nb, uint64_t *out, uint32_t *n);

/* Group (groups.c): res.groups in the requested grouping, unsorted; @seqs with keep_seqs. */
struct an_group_in {
	const struct ffm_graph *g;
	const struct oatab *site_of;
	const struct an_model_out *model;
	enum ffm_grouping grouping;
	bool keep_seqs;
};
int an_group(const struct an_group_in *in, struct ffm_analysis_result *res, struct an_seqs *seqs);
/* The key of @x's line of the program (its site key when it has no source line): the calls one
 * line makes are one point group (groups.c), and one conditional read (events.c). */
uint64_t an_line_key(const struct ffm_an_site *x);
/* A member's coverage (ffm_an_site.coverage) into a group's: the least one known. */
void an_group_coverage(struct ffm_an_group *gr, bool known, double coverage);

/* Bound (bound.c): every benefit capped by the busiest stream; frees tl->busy. */
void an_stream_bound(struct an_timeline *tl, struct ffm_analysis_result *res);

/* Collect evidence (evidence.c): first uses, first transfers, use delays of the sites. */
int an_evidence(struct an_catalog *cat, struct ffm_an_quality *q);

/* Sort (sort.c): groups, sites (references renumbered and @site_of anew), apis (@api_of freed),
 * event verdicts. */
int an_sort(struct ffm_analysis_result *res, struct oatab *site_of, struct oatab *api_of,
	    struct an_evvs *evv);
/* The driver functions' order: by time waited, then time, then name (also merge.c's). */
int an_cmp_api(const void *x, const void *y);

/* Save (save.c): a result as the store's result rows (an_save) or their headline. */
struct an_save_in {
	const struct ffm_analysis_result *res;
	const char *job_id; /* the job the result is of (NULL: none, nothing saved) */
	enum ffm_grouping grouping;
	const char *tool_version;
};
int an_save(const struct an_save_in *in, struct ffm_store *s, int64_t *ret_id);
void an_save_head(const struct an_save_in *in, struct ffm_store_analysis *h);



#endif
