/* SPDX-License-Identifier: MIT */
/*
 * ffmctl export <jobid> --format chrome-trace|hatchet [--run ID | --all-runs] [--no-merge]
 *                [--node NAME] [-o FILE[.gz]]
 *
 * chrome-trace  The Trace Event Format (JSON object form) that Perfetto and chrome://tracing
 *               open: complete events ("ph":"X") of the recorded driver calls and CPU waits, on
 *               their run's process track (pid = the run id, named "run N (stage S, job J)",
 *               ": the report's timeline" added on that run) and thread (tid, named with its
 *               process's pid); ts/dur in microseconds from the start of the first exported
 *               run; names as metadata ("ph":"M") events.
 *               Default: one run, the one the report's numbers come from (the analysis's
 *               run_profile: the timeline, stage 2, else the stage-1 baseline); --all-runs
 *               every run of the job, --run ID one. otherData.runs / .selection say which,
 *               otherData.merged whether runs of identical calls were merged.
 *               A run of identical calls becomes one span (see joins() for the rule) with
 *               args.count, total_us and mean_us, so a loop's thousand launches are one bar,
 *               not a file no viewer opens; --no-merge keeps one event per call.
 *               GPU tracks (one per process and stream, tid >= GPU_TID_BASE) hold the
 *               GPU work the timeline implies (analysis/gpu.c): spans "inferred" (an upper
 *               bound: from the call to the end of the wait that ordered it) or "measured" (a
 *               synchronous copy's time after its wait); flow events ("ph":"s"/"f") go from
 *               the calls that queued work to that wait (one arrow per merged span and wait,
 *               args.calls when it stands for several). Events the analysis calls problems
 *               (the report's verdicts, analysis/ffm_analysis.h: ffm_analysis__event_verdict)
 *               carry "cname":"terrible" (red), args.problem and args.call_site_benefit_us
 *               (the report's expected benefit of fixing their call site): in the runs the
 *               report used, each event as the report counts it; in other runs, the events of
 *               a call site whose every checked occurrence was the same problem, citing the
 *               run that checked. A merged span holds calls of one verdict only
 *               (args.problem_calls = args.count when they are problems). docs/REPORT.md
 *               documents it.
 * hatchet       Hatchet's literal format (hatchet.GraphFrame.from_literal): a JSON list of root
 *               nodes {"frame": {"name", "type", ...}, "metrics": {...}, "children": [...]}.
 *               The tree is the call path from the outermost application frame down to the
 *               driver function called; metrics (seconds, calls) on every node: "time (inc)",
 *               "time", "wait time (inc)", "wait time", "count (inc)", "count" — exclusive
 *               values are non-zero only on driver-function leaves. Default run: the latest
 *               ended stage-2 run of the job, else stage 1 (the runs that time calls).
 *
 * The store is opened read-only; the output goes to FILE through a temporary file (created,
 * O_EXCL: never one planted there) that is renamed at the end, so a failed export leaves no
 * half-written file; a FILE whose name ends in ".gz" is written gzip-compressed (Perfetto and
 * chrome://tracing open it as it is). Where standard error is a terminal a progress line
 * shows (cli/progress.c); at the end standard error says which runs were exported and what
 * was written: "wrote N events (M MB, from K calls) to FILE". A job that ran on several nodes
 * (one store per node, cli/report.h) is exported one node at a time: --node NAME, with the
 * node names of ffmctl report.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "analysis/ffm_analysis.h"
#include "cli/ffmctl.h"
#include "cli/report.h"
#include "common/oatab.h"
#include "store/ffm_store.h"
#include "symbols/ffm_driver.h"
#include "common/ffm_json.h"
#include "common/util.h"

#define MAX_RUNS 256
#define MAX_GPU_TRACKS 1024	     /* per run; more streams share the last one */
#define GPU_TID_BASE 0x40000000u /* GPU tracks' tids: above any Linux tid (pid_max <= 2^22) */

/* What the application frame and the driver function of a stack are, computed once. */
struct stack_info {
	struct oa_key k; /* (stack id, 0) */
	char *site;      /* "func (file:line)" of the innermost application frame, or NULL */
	char *driver_fn; /* outermost named libcuda frame (the public entry point), or NULL */
};

struct api_name {
	struct oa_key k; /* (api id, 1) */
	char *name;
};

/* A run of identical calls of one thread, open until a call that does not join it. */
struct span {
	struct oa_key k;	      /* (tgid << 32 | tid, 1) */
	struct ffm_store_event first; /* its first call */
	struct ffm_an_event_verdict v; /* every call's (joins() compares them) */
	uint64_t count;		      /* calls; 0: none open */
	uint64_t end_ns;	      /* the last call's end */
	uint64_t dur_ns, wait_ns, bytes; /* sums */
	int64_t last_event;
	uint64_t serial;	      /* which span it is, for merging its flow arrows */
	uint64_t outer_end;	      /* the latest end of the thread's calls before the span */
	uint64_t limit;		      /* the span ends by then (inside a call that encloses it) */
	char problem[256];	      /* args.problem of the first call, "" for none */
};

/* A flow arrow being written: the arrows of one merged span to one wait become one. */
struct flow_out {
	struct ffm_an_gpu_flow f;
	uint64_t serial; /* the span its source is in, 0: none merged */
	uint32_t calls;	 /* 0: no arrow pending */
};

/* Where the output goes: FILE or standard output, plain or through gzip; bytes counted. */
struct sink {
	FILE *raw;
	gzFile gz;
	uint64_t bytes; /* uncompressed, written so far */
	int err;
};

struct exp {
	struct ffm_store *s;
	const char *job_id;
	FILE *out;
	struct ffm_store_run runs[MAX_RUNS];
	int nruns;
	struct oatab apis;   /* struct api_name */
	struct oatab stacks; /* struct stack_info */
	struct ffm_analysis *an; /* the report's verdicts (chrome-trace) */
	/* The runs exported, and whose they are (the report's run may be an earlier job's). */
	struct ffm_store_run sel[MAX_RUNS];
	int nsel;
	const char *selection; /* otherData.selection: "timeline", "baseline", "all", "run" */
	char sel_job[128];     /* sel[0]'s job when it is not this job's ("": it is) */
	int64_t want;	       /* the run select_runs looks for */
	bool no_profile;       /* the report has no run of its own yet: every run exported */
	int64_t profile_run;   /* the run the report's numbers come from (0: none) */
	const char *role;      /* ... "timeline" or "baseline" */
	bool merge;
	int64_t cur_run;
	int cur_stage;
	const char *cur_job;
	uint64_t t0_ns;
	bool first;
	struct oatab seen; /* tracks named already ((tgid<<32|tid | run<<...): struct oa_key) */
	struct oatab site_of; /* stack id -> 1 + index in the analysis's sites (u32) */
	struct oatab open;    /* struct span per thread of the run */
	uint64_t serials;
	struct flow_out fl;
	struct ffm_an_gpu *gpu; /* the run's GPU tracks and flows (analysis/gpu.c) */
	struct ffm_an_kernels *kernels; /* the run's kernel names */
	struct gpu_track { uint32_t tgid; uint64_t stream; } gtracks[MAX_GPU_TRACKS];
	int ngtracks;
	struct ffmctl_progress *pr;
	uint64_t written, calls; /* trace events written; recorded calls (and waits) read */
	int err;
};

static const char *frame_name(const struct ffm_store_frame *f, char *buf, size_t len)
{
	const char *base;

	if (f->demangled && *f->demangled)
		return f->demangled;
	if (f->func && *f->func)
		return f->func;
	base = f->module ? strrchr(f->module, '/') : NULL;
	snprintf(buf, len, "%s+%#" PRIx64, base ? base + 1 : f->module ? f->module : "?", f->offset);
	return buf;
}

/* ---- lookups ------------------------------------------------------------------------------ */

static int on_api(uint32_t api, const char *name, void *ctx)
{
	struct api_name *a = oatab_find(&((struct exp *)ctx)->apis, api, 1, true);

	return a && (a->name = strdup(name ? name : "?")) ? 0 : -ENOMEM;
}

static const char *api_name(const struct exp *e, uint32_t api)
{
	const struct api_name *a = api ? oatab_get(&e->apis, api, 1) : NULL;

	return a ? a->name : NULL;
}

struct frame_walk {
	char site[512];
	char driver_fn[128];
	bool have_site;
	int rank;         /* the site frame's ffm_an_frame_rank */
	bool py, py_user; /* the site is a Python frame; ... outside the libraries */
};

static int on_site_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct frame_walk *w = ctx;
	char buf[256];
	int rank;

	if (ffm_module_owner(f->module) == FFM_MODULE_DRIVER) {
		/* Innermost first: the last named libcuda frame is the outermost, the entry point. */
		if (f->func && *f->func)
			snprintf(w->driver_fn, sizeof(w->driver_fn), "%s", f->func);
		return 0;
	}
	if (ffm_an_py_frame(f)) {
		/* A Python program's site, as the report names it (analysis/sites.c). */
		bool lib = ffm_an_py_library(f->file, NULL);

		if (!w->py || (!w->py_user && !lib)) {
			snprintf(w->site, sizeof(w->site), "%s:%u in %s", f->file ? f->file : "?",
				 f->line, f->func ? f->func : "?");
			w->have_site = w->py = true;
			w->py_user = !lib;
		}
		return 0;
	}
	rank = w->py ? 0 : ffm_an_frame_rank(f, NULL);
	if (!w->py && (!w->have_site || rank > w->rank)) {
		/* The first native frame of the best rank, as the report names sites. */
		w->rank = rank;
		if (f->file && *f->file)
			snprintf(w->site, sizeof(w->site), "%s (%s:%u)", frame_name(f, buf, sizeof(buf)),
				 f->file, f->line);
		else
			snprintf(w->site, sizeof(w->site), "%s", frame_name(f, buf, sizeof(buf)));
		w->have_site = true;
	}
	return 0;
}

/* The entry of @stack, created (frames read) on first use; NULL for stack 0 or on ENOMEM. */
static struct stack_info *stack_get(struct exp *e, int64_t stack)
{
	struct frame_walk w = {};
	struct stack_info *si;

	if (!stack)
		return NULL;
	si = oatab_get(&e->stacks, (uint64_t)stack, 0);
	if (si)
		return si;
	si = oatab_find(&e->stacks, (uint64_t)stack, 0, true);
	if (!si) {
		e->err = -ENOMEM;
		return NULL;
	}
	ffm_store__for_each_frame(e->s, stack, on_site_frame, &w);
	si->site = w.have_site ? strdup(w.site) : NULL;
	si->driver_fn = w.driver_fn[0] ? strdup(w.driver_fn) : NULL;
	return si;
}

static void free_exp(struct exp *e)
{
	for (size_t i = 0; i < e->apis.cap; i++) {
		struct api_name *a = oatab_slot(&e->apis, i);

		if (a)
			free(a->name);
	}
	oatab_free(&e->apis);
	oatab_free(&e->seen);
	for (size_t i = 0; i < e->stacks.cap; i++) {
		struct stack_info *si = oatab_slot(&e->stacks, i);

		if (si) {
			free(si->site);
			free(si->driver_fn);
		}
	}
	oatab_free(&e->stacks);
	oatab_free(&e->site_of);
	oatab_free(&e->open);
	ffm_an_gpu__free(e->gpu);
	ffm_an_kernels__free(e->kernels);
	ffm_analysis__free(e->an);
	ffm_store__free(e->s);
}

static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct exp *e = ctx;

	if (!r->job_id || strcmp(r->job_id, e->job_id))
		return 0;
	if (e->nruns == MAX_RUNS)
		return -E2BIG;
	e->runs[e->nruns] = *r;
	e->runs[e->nruns].job_id = NULL; /* valid only during the callback */
	e->nruns++;
	return 0;
}

/* ---- problems: the analysis's verdicts ----------------------------------------------------- */

static const char *problem_name(unsigned p)
{
	return p == FFM_PROBLEM_UNNECESSARY_SYNC ? "unnecessary synchronization" :
	       p == FFM_PROBLEM_MISPLACED_SYNC ? "misplaced synchronization" :
	       p == FFM_PROBLEM_HOST_READ ? "host read every iteration" :
	       p == FFM_PROBLEM_LAUNCH_BLOCKED ? "launch blocked" :
	       p == FFM_PROBLEM_TEMP_BUFFER ? "temporary buffer" : "duplicate transfer";
}

/* args.problem of an event with a verdict; "" for none. */
static void problem_text(const struct ffm_an_event_verdict *v, const struct ffm_store_event *ev,
			 char *buf, size_t len)
{
	size_t n;

	buf[0] = 0;
	if (v->problem == FFM_PROBLEM_NONE)
		return;
	if (v->site_wide) {
		snprintf(buf, len, "%s at this call site (all %" PRIu64 " checked in run %" PRId64 ")",
			 problem_name(v->problem), v->checked, v->from_run);
		return;
	}
	if (v->problem == FFM_PROBLEM_UNNECESSARY_SYNC)
		snprintf(buf, len, "unnecessary synchronization: no protected data was used before the "
			 "next one%s", v->partial ? " (coverage partial)" : "");
	else if (v->problem == FFM_PROBLEM_MISPLACED_SYNC)
		snprintf(buf, len, "misplaced synchronization: protected data first used %.3f us after it",
			 v->use_delay_ns / 1e3);
	else if (v->problem != FFM_PROBLEM_DUPLICATE_TRANSFER)
		snprintf(buf, len, "%s", problem_name(v->problem));
	else if (v->first_event)
		snprintf(buf, len, "duplicate transfer: the same %" PRIu64 " bytes to the same "
			 "destination as event %" PRId64, ev->bytes, v->first_event);
	else
		snprintf(buf, len, "duplicate transfer: the same %" PRIu64 " bytes to the same "
			 "destination again", ev->bytes);
	n = strlen(buf);
	if (v->duplicate && v->problem != FFM_PROBLEM_DUPLICATE_TRANSFER && n < len)
		n += snprintf(buf + n, len - n, "; also a duplicate transfer");
	if (ev->run != v->from_run && n < len)
		snprintf(buf + n, len - n, " (verdict of run %" PRId64 ")", v->from_run);
}

/* ---- chrome trace ------------------------------------------------------------------------- */

static const char *kind_name(uint32_t k)
{
	static const char *const n[] = { "?", "wait", "api", "transfer", "alloc", "free", "memset",
					 "launch" };

	return k < sizeof(n) / sizeof(n[0]) ? n[k] : "?";
}

static const char *dir_name(uint32_t d)
{
	static const char *const n[] = { "none", "HtoD", "DtoH", "DtoD", "HtoH", "peer" };

	return d < sizeof(n) / sizeof(n[0]) ? n[d] : "?";
}

/* Whether thread or process @k was named already (it is from now on). */
static bool seen_thread(struct exp *e, uint64_t k)
{
	size_t n = e->seen.n;

	if (!oatab_find(&e->seen, k, 1, true))
		e->err = -ENOMEM;
	return e->seen.n == n;
}

/* One string value; a failure (out of memory, output) ends the export through e->err. */
static void put_str(struct exp *e, const char *s)
{
	int err = ffm_json_write_str(e->out, s);

	if (err && !e->err)
		e->err = err;
}

static void sep(struct exp *e)
{
	fputs(e->first ? "\n" : ",\n", e->out);
	e->first = false;
	e->written++;
}

/* A metadata event: {"name":@what,"ph":"M","pid":run,"tid":@tid,"args":{"name":@name}}. */
static void meta_name(struct exp *e, const char *what, uint32_t tid, const char *name)
{
	sep(e);
	fprintf(e->out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%u,\"args\":{\"name\":",
		what, e->cur_run, tid);
	put_str(e, name);
	fputs("}}", e->out);
}

static void meta_sort(struct exp *e, const char *what, uint32_t tid, int64_t index)
{
	sep(e);
	fprintf(e->out, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%" PRId64 ",\"tid\":%u,"
		"\"args\":{\"sort_index\":%" PRId64 "}}", what, e->cur_run, tid, index);
}

/* The run's process track (pid = run id), named once per run. */
static void name_run(struct exp *e)
{
	bool report = e->cur_run == e->profile_run;
	char name[256];

	/* The run the report's numbers come from says so, whichever runs are exported. */
	snprintf(name, sizeof(name), "run %" PRId64 " (stage %d, job %s%s%s)", e->cur_run,
		 e->cur_stage, e->cur_job, report ? ": the report's " : "", report ? e->role : "");
	meta_name(e, "process_name", 0, name);
	meta_sort(e, "process_sort_index", 0, e->cur_run);
}

/* A CPU thread's track in the run: tid as the kernel has it, named with its process. */
static void name_thread(struct exp *e, uint32_t tgid, uint32_t tid)
{
	char name[128];

	if (seen_thread(e, (uint64_t)tgid << 32 | tid))
		return;
	snprintf(name, sizeof(name), tid == tgid ? "pid %u main thread" : "pid %u thread %u", tgid, tid);
	meta_name(e, "thread_name", tid, name);
}

/* The trace tid of the GPU track of (tgid, stream) in the current run, named on first use. */
static uint32_t gpu_tid(struct exp *e, uint32_t tgid, uint64_t stream)
{
	char name[128];
	int i;

	for (i = 0; i < e->ngtracks; i++)
		if (e->gtracks[i].tgid == tgid && e->gtracks[i].stream == stream)
			return GPU_TID_BASE + (uint32_t)i;
	if (e->ngtracks == MAX_GPU_TRACKS)
		return GPU_TID_BASE + MAX_GPU_TRACKS - 1;
	e->gtracks[i] = (struct gpu_track){ tgid, stream };
	e->ngtracks++;
	if (stream)
		snprintf(name, sizeof(name), "GPU stream %#" PRIx64 " (pid %u)", stream, tgid);
	else
		snprintf(name, sizeof(name), "GPU default stream (pid %u)", tgid);
	meta_name(e, "thread_name", GPU_TID_BASE + (uint32_t)i, name);
	meta_sort(e, "thread_sort_index", GPU_TID_BASE + (uint32_t)i, 1000000 + i);
	return GPU_TID_BASE + (uint32_t)i;
}

static double us_of(const struct exp *e, uint64_t ns)
{
	return ns >= e->t0_ns ? (double)(ns - e->t0_ns) / 1e3 : 0.0;
}

static int on_gpu_span(const struct ffm_an_gpu_span *sp, void *ctx)
{
	struct exp *e = ctx;
	uint32_t tid = gpu_tid(e, sp->tgid, sp->stream);

	const char *kernel = ffm_an_kernels__name(e->kernels, sp->tgid, sp->kernel);
	char name[1024]; /* a longer demangled name is cut */

	sep(e);
	if (sp->inferred && kernel) {
		/* the kernel's name: what a user looks for on the track */
		snprintf(name, sizeof(name), "%s%s (%u call%s)", kernel,
			 sp->other_kernels ? " and others" : "", sp->calls, sp->calls == 1 ? "" : "s");
		fputs("{\"name\":", e->out);
		put_str(e, name);
		fputs(",\"cat\":\"gpu,inferred\"", e->out);
	} else if (sp->inferred)
		fprintf(e->out, "{\"name\":\"GPU work of %u call%s\",\"cat\":\"gpu,inferred\"", sp->calls,
			sp->calls == 1 ? "" : "s");
	else
		fputs("{\"name\":\"copy\",\"cat\":\"gpu,measured\"", e->out);
	fprintf(e->out, ",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u,"
		"\"args\":{\"run\":%" PRId64 ",\"timing\":\"%s\",\"calls\":%u,\"first_event\":%" PRId64
		",\"launched_us\":%.3f,\"ended_by\":", us_of(e, sp->start_ns),
		(double)(sp->end_ns - sp->start_ns) / 1e3, e->cur_run, tid, e->cur_run,
		sp->inferred ? "inferred: ran within this span at most (from the call to the end of "
			       "the wait that ordered it)" : "measured: the call's time after its wait",
		sp->calls, sp->first_event, us_of(e, sp->launched_ns));
	if (sp->ended_by)
		fprintf(e->out, "%" PRId64, sp->ended_by);
	else
		fputs("\"process exit\"", e->out);
	if (sp->bytes)
		fprintf(e->out, ",\"bytes\":%" PRIu64, sp->bytes);
	if (kernel) {
		fputs(",\"kernel\":", e->out);
		put_str(e, kernel);
	}
	fputs("}}", e->out);
	return ferror(e->out) ? -EIO : 0;
}

/* Write the pending arrow, if any. */
static void flush_flow(struct exp *e)
{
	const struct ffm_an_gpu_flow *f = &e->fl.f;

	if (!e->fl.calls)
		return;
	sep(e);
	fprintf(e->out, "{\"name\":\"waits for\",\"cat\":\"gpu\",\"ph\":\"s\",\"id\":%" PRId64
		",\"ts\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u", f->from_event, us_of(e, f->from_ns),
		e->cur_run, f->from_tid);
	if (e->fl.calls > 1)
		fprintf(e->out, ",\"args\":{\"calls\":%u}", e->fl.calls);
	fputs("}", e->out);
	sep(e);
	fprintf(e->out, "{\"name\":\"waits for\",\"cat\":\"gpu\",\"ph\":\"f\",\"bp\":\"e\",\"id\":%"
		PRId64 ",\"ts\":%.3f,\"pid\":%" PRId64 ",\"tid\":%u}", f->from_event,
		us_of(e, f->to_ns), e->cur_run, f->to_tid);
	e->fl.calls = 0;
}

/*
 * An arrow from a call that queued GPU work to the wait that ended it. The arrows of the calls
 * of one merged span to one wait are one (from its first such call, args.calls of them): the
 * span is still open when its wait comes (the wait, another call, ends it after this).
 */
static int on_gpu_flow(const struct ffm_an_gpu_flow *f, void *ctx)
{
	struct exp *e = ctx;
	const struct span *sp = oatab_get(&e->open, (uint64_t)f->tgid << 32 | f->from_tid, 1);
	uint64_t serial = sp && sp->count > 1 && sp->first.start_ns <= f->from_ns ? sp->serial : 0;

	if (e->fl.calls && serial && e->fl.serial == serial && e->fl.f.to_event == f->to_event) {
		e->fl.calls++;
		return 0;
	}
	flush_flow(e);
	e->fl = (struct flow_out){ .f = *f, .serial = serial, .calls = 1 };
	return ferror(e->out) ? -EIO : 0;
}

/* The report's call site of @stack, NULL when it is no site of it. */
static const struct ffm_an_site *site_of_stack(const struct exp *e, int64_t stack)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(e->an);
	uint32_t i = oatab_get_u32(&e->site_of, (uint64_t)stack);

	return i && i <= r->n_sites ? &r->sites[i - 1] : NULL;
}

/* args of a problem's event: the report's expected benefit of fixing its call site; for a
 * conditional read (the required-read rule), what reading it every N iterations would save,
 * in no total. */
static void put_benefit(struct exp *e, int64_t stack)
{
	const struct ffm_an_site *x = site_of_stack(e, stack);

	if (!x)
		return;
	if (x->read_conditional)
		fprintf(e->out, ",\"conditional\":true,\"conditional_benefit_us\":%.3f,"
			"\"read_every\":%u", x->benefit_ns / 1e3,
			ffm_analysis__result(e->an)->read_every);
	else
		fprintf(e->out, ",\"call_site_benefit_us\":%.3f", x->benefit_ns / 1e3);
}

/* The name of an event: its API, else (a stage-1 wait) the driver entry point, else its kind. */
static const char *event_name(struct exp *e, const struct ffm_store_event *ev,
			      const struct stack_info *si)
{
	const char *name = api_name(e, ev->api);

	if (!name)
		name = ev->kind == 1 && si && si->driver_fn ? si->driver_fn : kind_name(ev->kind);
	return name;
}

/* The span's complete event; the span is closed (count 0) after. */
static void write_span(struct exp *e, struct span *sp)
{
	const struct ffm_store_event *ev = &sp->first;
	struct stack_info *si = stack_get(e, ev->stack);

	sep(e);
	fputs("{\"name\":", e->out);
	put_str(e, event_name(e, ev, si));
	fprintf(e->out, ",\"cat\":\"%s%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%" PRId64
		",\"tid\":%u", kind_name(ev->kind), sp->problem[0] ? ",problem" : "",
		us_of(e, ev->start_ns), (double)(sp->end_ns - ev->start_ns) / 1e3, e->cur_run, ev->tid);
	if (sp->problem[0])
		fputs(",\"cname\":\"terrible\"", e->out);
	fprintf(e->out, ",\"args\":{\"run\":%" PRId64 ",\"stage\":%d,\"event\":%" PRId64
		",\"pid\":%u,\"wait_us\":%.3f", e->cur_run, e->cur_stage, ev->id, ev->tgid,
		sp->wait_ns / 1e3);
	if (sp->bytes)
		fprintf(e->out, ",\"bytes\":%" PRIu64, sp->bytes);
	if (ev->dir)
		fprintf(e->out, ",\"direction\":\"%s\"", dir_name(ev->dir));
	if (ev->stream)
		fprintf(e->out, ",\"stream\":\"%#" PRIx64 "\"", ev->stream);
	if (si && si->site) {
		fputs(",\"call_site\":", e->out);
		put_str(e, si->site);
	}
	if (sp->problem[0]) {
		fputs(",\"problem\":", e->out);
		put_str(e, sp->problem);
		put_benefit(e, ev->stack);
	}
	if (sp->count > 1) {
		fprintf(e->out, ",\"count\":%" PRIu64 ",\"last_event\":%" PRId64 ",\"total_us\":%.3f"
			",\"mean_us\":%.3f", sp->count, sp->last_event, sp->dur_ns / 1e3,
			sp->dur_ns / 1e3 / (double)sp->count);
		if (sp->problem[0])
			fprintf(e->out, ",\"problem_calls\":%" PRIu64, sp->count);
	}
	fputs("}}", e->out);
	sp->count = 0;
}

/*
 * Whether call @ev (verdict @v) joins the open span @sp of its thread, the merge rule: the
 * same kind, API, stack (so the same call site), stream and direction; the same verdict (a
 * problem never merges with a call that is none, nor with another kind of problem); it starts
 * at or after the span's last call ended (nothing nests in a span); the gap before it is at
 * most the mean duration of the span's calls so far; and the span stays at least half busy
 * with its calls; and it stays inside any earlier call of the thread that encloses its first
 * (spans nest or are disjoint). So a merged span never bridges a time the thread spent
 * elsewhere that is long next to the calls, and its args.total_us is at least half its length.
 */
static bool joins(const struct exp *e, const struct span *sp, const struct ffm_store_event *ev,
		  const struct ffm_an_event_verdict *v)
{
	const struct ffm_store_event *f = &sp->first;

	if (!e->merge || !sp->count || ev->kind != f->kind || ev->api != f->api ||
	    ev->stack != f->stack || ev->stream != f->stream || ev->dir != f->dir ||
	    v->problem != sp->v.problem || v->duplicate != sp->v.duplicate ||
	    v->site_wide != sp->v.site_wide || ev->start_ns < sp->end_ns)
		return false;
	return (ev->start_ns - sp->end_ns) * sp->count <= sp->dur_ns &&
	       ev->start_ns + ev->dur_ns - f->start_ns <= 2 * (sp->dur_ns + ev->dur_ns) &&
	       ev->start_ns + ev->dur_ns <= sp->limit;
}

static int on_trace_event(const struct ffm_store_event *ev, void *ctx)
{
	struct exp *e = ctx;
	struct ffm_an_event_verdict v;
	struct span *sp;
	int err;

	if (e->err)
		return e->err;
	if (ffm_analysis__event_verdict(e->an, ev, &v) < 0)
		return -EINVAL;
	if ((err = ffm_an_gpu__event(e->gpu, ev, api_name(e, ev->api))) < 0)
		return err;
	flush_flow(e);
	e->calls++;
	if (e->pr)
		atomic_store_explicit(&e->pr->an.done, e->calls, memory_order_relaxed);
	name_thread(e, ev->tgid, ev->tid);
	sp = oatab_find(&e->open, (uint64_t)ev->tgid << 32 | ev->tid, 1, true);
	if (!sp)
		return -ENOMEM;
	if (joins(e, sp, ev, &v)) {
		sp->count++;
		sp->end_ns = ev->start_ns + ev->dur_ns;
		sp->dur_ns += ev->dur_ns;
		sp->wait_ns += ev->wait_ns;
		sp->bytes += ev->bytes;
		sp->last_event = ev->id;
		return 0;
	}
	if (sp->count) {
		sp->outer_end = sp->end_ns > sp->outer_end ? sp->end_ns : sp->outer_end;
		write_span(e, sp);
	}
	sp->limit = sp->outer_end > ev->start_ns ? sp->outer_end : UINT64_MAX;
	sp->first = *ev;
	sp->v = v;
	sp->count = 1;
	sp->end_ns = ev->start_ns + ev->dur_ns;
	sp->dur_ns = ev->dur_ns;
	sp->wait_ns = ev->wait_ns;
	sp->bytes = ev->bytes;
	sp->last_event = ev->id;
	sp->serial = ++e->serials;
	problem_text(&v, ev, sp->problem, sizeof(sp->problem));
	return e->err ? e->err : ferror(e->out) ? -EIO : 0;
}

static int on_trace_process(const struct ffm_store_process *p, void *ctx)
{
	struct exp *e = ctx;

	return ffm_an_gpu__process_end(e->gpu, p->tgid, p->end_ns);
}

/* One run: its process track, its threads' calls, its GPU tracks and flows. */
static int trace_run(struct exp *e, const struct ffm_store_run *r, const char *job)
{
	int err;

	e->cur_run = r->id;
	e->cur_stage = r->stage;
	e->cur_job = job;
	e->ngtracks = 0;
	oatab_free(&e->seen);
	e->seen = OATAB_INIT(struct oa_key);
	oatab_free(&e->open);
	e->open = OATAB_INIT(struct span);
	ffm_an_gpu__reset(e->gpu);
	e->kernels = ffm_an_kernels__free(e->kernels);
	err = ffm_an_kernels__load(e->s, r->id, &e->kernels);
	if (err < 0)
		return err;
	name_run(e);
	err = ffm_store__for_each_event(e->s, r->id, on_trace_event, e);
	if (err >= 0)
		err = ffm_store__for_each_process(e->s, r->id, on_trace_process, e);
	flush_flow(e);
	for (size_t i = 0; i < e->open.cap; i++) {
		struct span *sp = oatab_slot(&e->open, i);

		if (sp && sp->count)
			write_span(e, sp);
	}
	return err < 0 ? err : e->err;
}

/* stack id -> 1 + its site's index in the analysis's result. */
static int map_sites(struct exp *e)
{
	const struct ffm_analysis_result *r = ffm_analysis__result(e->an);

	for (size_t i = 0; i < r->n_sites; i++)
		if (oatab_put_u32(&e->site_of, (uint64_t)r->sites[i].stack, (uint32_t)i + 1) < 0)
			return -ENOMEM;
	return 0;
}

/* The run e->want of another job of the key (the report's run may be an earlier job's). */
static int on_other_run(const struct ffm_store_run *r, void *ctx)
{
	struct exp *e = ctx;

	if (r->id != e->want)
		return 0;
	e->sel[0] = *r;
	e->sel[0].job_id = NULL;
	snprintf(e->sel_job, sizeof(e->sel_job), "%s", r->job_id ? r->job_id : "?");
	e->nsel = 1;
	return 1;
}

/*
 * The runs to export into e->sel: @only_run; every run of the job (@all); by default the run
 * the report's numbers come from (the analysis's run_profile: the timeline, else the stage-1
 * baseline), or every run when there is none yet.
 */
static int select_runs(struct exp *e, int64_t only_run, bool all)
{
	const struct ffm_analysis_result *res = ffm_analysis__result(e->an);
	int err;

	e->profile_run = res->run_profile;
	e->role = res->run_profile == res->run_timeline ? "timeline" : "baseline";
	e->want = only_run ? only_run : all ? 0 : res->run_profile;
	e->no_profile = !only_run && !all && !e->want;
	e->selection = only_run ? "run" : all || !e->want ? "all" : e->role;
	e->nsel = 0;
	for (int i = 0; i < e->nruns; i++)
		if (!e->want || e->runs[i].id == e->want)
			e->sel[e->nsel++] = e->runs[i];
	if (!e->nsel && e->want && (err = ffm_store__for_each_run(e->s, on_other_run, e)) < 0)
		return err;
	if (!e->nsel)
		return -ENOENT; /* the analysis's run is gone: cannot be */
	return 0;
}

/* Say on standard error which runs are exported. */
static void say_runs(const struct exp *e)
{
	char other[160] = "";

	if (e->sel_job[0])
		snprintf(other, sizeof(other), ", of job %s", e->sel_job);
	if (!strcmp(e->selection, "all"))
		fprintf(stderr, "ffmctl export: job %s: all %d runs%s\n", e->job_id, e->nsel,
			e->no_profile ? " (none is a timeline or baseline yet)" : "");
	else if (!strcmp(e->selection, "run"))
		fprintf(stderr, "ffmctl export: job %s: run %" PRId64 " (stage %d)\n", e->job_id,
			e->sel[0].id, e->sel[0].stage);
	else
		fprintf(stderr, "ffmctl export: job %s: run %" PRId64 " (stage %d%s), the %s the "
			"report's numbers come from; --all-runs exports all %d runs of the job\n",
			e->job_id, e->sel[0].id, e->sel[0].stage, other, e->selection, e->nruns);
}

static int on_count(const struct ffm_store_stack_agg *a, void *ctx)
{
	*(uint64_t *)ctx += a->count;
	return 0;
}

/* The header: otherData says the job, the clock, which runs and whether calls are merged. */
static void trace_header(struct exp *e)
{
	fprintf(e->out, "{\"displayTimeUnit\":\"ns\",\"otherData\":{\"tool\":\"ffm\",\"job\":");
	put_str(e, e->job_id);
	fprintf(e->out, ",\"clock\":\"CLOCK_MONOTONIC\",\"t0_ns\":%" PRIu64 ",\"selection\":\"%s\","
		"\"runs\":[", e->t0_ns, e->selection);
	for (int i = 0; i < e->nsel; i++)
		fprintf(e->out, "%s%" PRId64, i ? "," : "", e->sel[i].id);
	fprintf(e->out, "],\"merged\":%s},\"traceEvents\":[", e->merge ? "true" : "false");
}

static int export_trace(struct exp *e, int64_t only_run, bool all)
{
	/* The verdicts as the job's report has them (every run of the key up to the job's last). */
	struct ffm_analysis_opts ao = { .sz = sizeof(ao), .job_id = e->job_id,
					.event_verdicts = true,
					.progress = e->pr->running ? &e->pr->an : NULL };
	uint64_t total = 0;
	int err;

	if ((err = ffm_analysis__run(e->s, &ao, &e->an)) < 0 || (err = map_sites(e)) < 0 ||
	    (err = ffm_an_gpu__new(on_gpu_span, on_gpu_flow, e, &e->gpu)) < 0 ||
	    (err = select_runs(e, only_run, all)) < 0)
		return err;
	e->t0_ns = UINT64_MAX;
	for (int i = 0; i < e->nsel; i++) {
		e->t0_ns = e->sel[i].start_ns < e->t0_ns ? e->sel[i].start_ns : e->t0_ns;
		ffm_store__for_each_stack_agg(e->s, e->sel[i].id, on_count, &total);
	}
	atomic_store(&e->pr->an.done, 0);
	atomic_store(&e->pr->an.total, total);
	atomic_store(&e->pr->an.phase, "writing the trace");
	trace_header(e);
	e->first = true;
	for (int i = 0; i < e->nsel; i++)
		if ((err = trace_run(e, &e->sel[i], i == 0 && e->sel_job[0] ? e->sel_job :
					 e->job_id)) < 0)
			return err;
	fputs("\n]}\n", e->out);
	return e->err;
}

/* ---- hatchet ------------------------------------------------------------------------------ */

struct hnode {
	char *name, *type, *file, *module;
	uint32_t line;
	int first_child, next; /* indices, -1 = none */
	double time, wait, time_inc, wait_inc;
	uint64_t count, count_inc;
};

struct htree {
	struct hnode *n;
	size_t len, cap;
	int first_root;
	struct exp *e;
	int err;
	/* frames of the stack being added, innermost first */
	struct ffm_store_frame fr[256];
	char *strs[256][4];
	uint32_t nfr;
};

static int hnode_child(struct htree *t, int parent, const char *name, const char *type,
		       const char *file, uint32_t line, const char *module)
{
	int *link = parent < 0 ? &t->first_root : &t->n[parent].first_child;
	int i;

	for (i = *link; i >= 0; i = t->n[i].next)
		if (!strcmp(t->n[i].name, name) && !strcmp(t->n[i].type, type) &&
		    !strcmp(t->n[i].module, module ? module : "") &&
		    /* Driver leaves are per call site; functions per name and module. */
		    (strcmp(type, "driver") || (!strcmp(t->n[i].file, file ? file : "") &&
						 t->n[i].line == line)))
			return i;
	if (FFM_GROW(t->n, t->cap, t->len + 1) < 0)
		return -ENOMEM;
	i = (int)t->len;
	t->n[i] = (struct hnode){ .name = strdup(name), .type = strdup(type),
				  .file = strdup(file ? file : ""), .module = strdup(module ? module : ""),
				  .line = line, .first_child = -1, .next = -1 };
	if (!t->n[i].name || !t->n[i].type || !t->n[i].file || !t->n[i].module)
		return -ENOMEM;
	t->len++;
	/* Append, so children keep the order they were first seen in. */
	link = parent < 0 ? &t->first_root : &t->n[parent].first_child;
	while (*link >= 0)
		link = &t->n[*link].next;
	*link = i;
	return i;
}

static int on_tree_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct htree *t = ctx;
	uint32_t i = t->nfr;

	if (i == sizeof(t->fr) / sizeof(t->fr[0]))
		return 0; /* deeper than any stack the collector keeps */
	t->fr[i] = *f;
	t->strs[i][0] = f->module ? strdup(f->module) : NULL;
	t->strs[i][1] = f->func ? strdup(f->func) : NULL;
	t->strs[i][2] = f->demangled ? strdup(f->demangled) : NULL;
	t->strs[i][3] = f->file ? strdup(f->file) : NULL;
	t->fr[i].module = t->strs[i][0];
	t->fr[i].func = t->strs[i][1];
	t->fr[i].demangled = t->strs[i][2];
	t->fr[i].file = t->strs[i][3];
	t->fr[i].folded = NULL;
	t->fr[i].build_id = NULL;
	t->nfr++;
	return 0;
}

static int on_agg(const struct ffm_store_stack_agg *a, void *ctx)
{
	struct htree *t = ctx;
	const char *leaf = api_name(t->e, a->api), *site_file = NULL;
	uint32_t app = 0, site_line = 0;
	int node = -1, path[257], np = 0;
	double time = a->dur_ns / 1e9, wait = (a->kind == 1 ? a->dur_ns : a->wait_ns) / 1e9;
	char buf[256];

	t->nfr = 0;
	ffm_store__for_each_frame(t->e->s, a->stack, on_tree_frame, t);
	/* Skip the driver's own frames (innermost); without an api id, the outermost named one
	 * is the entry point that was called. */
	while (app < t->nfr && ffm_module_owner(t->fr[app].module) == FFM_MODULE_DRIVER)
		app++;
	for (uint32_t i = app; !leaf && i-- > 0;)
		if (t->fr[i].func && *t->fr[i].func)
			leaf = t->fr[i].func;
	if (!leaf)
		leaf = a->kind == 1 ? "(wait in libcuda)" : kind_name(a->kind);
	if (app < t->nfr) {
		site_file = t->fr[app].file;
		site_line = t->fr[app].line;
	}
	/* Outermost application frame first. */
	for (uint32_t i = t->nfr; i-- > app;) {
		const struct ffm_store_frame *f = &t->fr[i];

		node = hnode_child(t, node, frame_name(f, buf, sizeof(buf)), "function", f->file,
				   f->line, f->module);
		if (node < 0)
			goto out;
		path[np++] = node;
	}
	node = hnode_child(t, node, leaf, "driver", site_file, site_line, "libcuda");
	if (node < 0)
		goto out;
	path[np++] = node;
	t->n[node].time += time;
	t->n[node].wait += wait;
	t->n[node].count += a->count;
	t->e->calls += a->count;
	for (int i = 0; i < np; i++) {
		t->n[path[i]].time_inc += time;
		t->n[path[i]].wait_inc += wait;
		t->n[path[i]].count_inc += a->count;
	}
out:
	for (uint32_t i = 0; i < t->nfr; i++)
		for (int k = 0; k < 4; k++)
			free(t->strs[i][k]);
	return node < 0 ? -ENOMEM : 0;
}

static json_t *hnode_json(const struct htree *t, int i)
{
	const struct hnode *n = &t->n[i];
	json_t *frame, *v;

	/* o*: no file (and line) or module when unknown */
	frame = json_pack("{s:o,s:s,s:o*,s:o*,s:o*}", "name", ffm_json_string(n->name), "type", n->type,
			  "file", n->file[0] ? ffm_json_string(n->file) : NULL,
			  "line", n->file[0] ? json_integer(n->line) : NULL,
			  "module", n->module[0] ? ffm_json_string(n->module) : NULL);
	v = json_pack("{s:o,s:{s:o,s:o,s:o,s:o,s:o,s:o}}", "frame", frame, "metrics",
		      "time (inc)", ffm_json_fixed(n->time_inc, 9),
		      "time", ffm_json_fixed(n->time, 9),
		      "wait time (inc)", ffm_json_fixed(n->wait_inc, 9),
		      "wait time", ffm_json_fixed(n->wait, 9),
		      "count (inc)", ffm_json_u64(n->count_inc),
		      "count", ffm_json_u64(n->count));
	if (n->first_child >= 0) {
		json_t *children = json_array();

		for (int c = n->first_child; c >= 0; c = t->n[c].next)
			children = ffm_json_append(children, hnode_json(t, c));
		v = ffm_json_set(v, "children", children);
	}
	return v;
}

static int export_hatchet(struct exp *e, int64_t run)
{
	struct htree t = { .first_root = -1, .e = e };
	int err;

	err = ffm_store__for_each_stack_agg(e->s, run, on_agg, &t);
	if (err >= 0) {
		json_t *roots = json_array();

		for (int r = t.first_root; r >= 0; r = t.n[r].next)
			roots = ffm_json_append(roots, hnode_json(&t, r));
		err = ffm_json_print(e->out, roots);
	}
	e->written = t.len;
	for (size_t i = 0; i < t.len; i++) {
		free(t.n[i].name);
		free(t.n[i].type);
		free(t.n[i].file);
		free(t.n[i].module);
	}
	free(t.n);
	return err;
}

/* ---- runs ---------------------------------------------------------------------------------- */

static int64_t default_tree_run(const struct exp *e)
{
	int64_t best = 0;
	int best_stage = 0;

	/* Runs are in id order: a later run of the same stage replaces an earlier one. */
	for (int i = 0; i < e->nruns; i++) {
		const struct ffm_store_run *r = &e->runs[i];

		if (!r->end_ns || r->stage > 2 || r->stage < best_stage)
			continue;
		best = r->id;
		best_stage = r->stage;
	}
	return best;
}

/*
 * Open the job's store into e->s: that of its only node, or of node @node. Returns an exit
 * code, having said why on failure.
 */
static int open_store(struct exp *e, const char *node)
{
	struct ffmctl_job_stores js;
	char names[512] = "";
	size_t pick = 0, off = 0;
	int err;

	err = ffmctl_job_stores__open(ffmctl_g.state_dir, e->job_id, &js);
	if (err < 0) {
		ffmctl_no_job_err("export", ffmctl_g.state_dir, e->job_id, err);
		return EXIT_FAIL;
	}
	while (node && pick < js.n && strcmp(js.v[pick].name, node))
		pick++;
	if (pick < js.n && (node || js.n == 1)) {
		e->s = ffm_store__ref(js.v[pick].store);
		ffmctl_job_stores__close(&js);
		return EXIT_OK;
	}
	for (size_t i = 0; i < js.n && off < sizeof(names); i++)
		off += (size_t)snprintf(names + off, sizeof(names) - off, "%s%s", i ? ", " : "",
					js.v[i].name);
	if (node)
		ffmctl_err("export", "job %s did not run on a node '%s' (its nodes: %s)", e->job_id,
			   node, names);
	else
		ffmctl_err("export", "job %s ran on %zu nodes (%s): export one with --node NAME",
			   e->job_id, js.n, names);
	ffmctl_job_stores__close(&js);
	return EXIT_USAGE;
}

/* ---- output: plain or gzip, counted --------------------------------------------------------- */

static ssize_t sink_write(void *c, const char *buf, size_t n)
{
	struct sink *k = c;

	if (k->gz ? (n && gzwrite(k->gz, buf, (unsigned)n) != (int)n) :
		    fwrite(buf, 1, n, k->raw) != n) {
		k->err = -EIO;
		return -1;
	}
	k->bytes += n;
	return (ssize_t)n;
}

static int sink_close(void *c)
{
	struct sink *k = c;
	int r = 0;

	if (k->gz)
		r = gzclose(k->gz) == Z_OK ? 0 : -1;
	else if (k->raw == stdout)
		r = fflush(stdout) ? -1 : 0;
	else if (k->raw)
		r = fclose(k->raw) ? -1 : 0;
	k->gz = NULL;
	k->raw = NULL;
	return r;
}

static bool ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), m = strlen(tail);

	return n >= m && !strcmp(s + n - m, tail);
}

/*
 * e->out onto the new file @path (NULL: standard output), through gzip with @gz. The file is
 * created, never opened: a file or link planted at the temporary name fails the export
 * instead of being written through (ffmctl may run as root, in a directory others write).
 * 0 or -errno.
 */
static int sink_open(struct exp *e, struct sink *k, const char *path, bool gz, bool direct)
{
	int fd = -1;

	*k = (struct sink){ .raw = stdout };
	/* direct: an existing device or FIFO (-o /dev/null), written as it is */
	if (path && (fd = open(path, direct ? O_WRONLY | O_CLOEXEC | O_NOCTTY
					    : O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
			       0666)) < 0)
		return -errno;
	if (path && gz) {
		/* Level 6, zlib's default: 4.1 MB of a 67 MB trace in 0.7 s (level 1: 5.8 MB in
		 * 0.24 s; 9: 3.9 MB in 2 s). docs/REPORT.md has the figures. */
		k->gz = gzdopen(fd, "wb6");
		if (!k->gz) {
			close(fd);
			return -ENOMEM;
		}
		gzbuffer(k->gz, 1u << 20);
	} else if (path && !(k->raw = fdopen(fd, "w"))) {
		close(fd);
		return -ENOMEM;
	}
	e->out = fopencookie(k, "w", (cookie_io_functions_t){ .write = sink_write,
							      .close = sink_close });
	if (!e->out) {
		sink_close(k);
		return -ENOMEM;
	}
	setvbuf(e->out, NULL, _IOFBF, 1u << 20);
	return 0;
}

/* "3.1 MB" (or kB, for less than 0.1 MB). */
static const char *size_str(uint64_t bytes, char *buf, size_t len)
{
	if (bytes >= 100000)
		snprintf(buf, len, "%.1f MB", bytes / 1e6);
	else
		snprintf(buf, len, "%.1f kB", bytes / 1e3);
	return buf;
}

/* The last line: what was written where. */
static void say_written(const struct exp *e, const struct sink *k, const char *format,
			const char *output)
{
	struct stat st;
	char a[32], b[32], raw[64] = "";
	uint64_t size = k->bytes;

	if (output && ends_with(output, ".gz") && !stat(output, &st)) {
		size = (uint64_t)st.st_size;
		snprintf(raw, sizeof(raw), ", %s uncompressed", size_str(k->bytes, b, sizeof(b)));
	}
	fprintf(stderr, "ffmctl export: wrote %" PRIu64 " %s (%s%s, from %" PRIu64 " calls) to %s\n",
		e->written, strcmp(format, "hatchet") ? "events" : "nodes", size_str(size, a, sizeof(a)),
		raw, e->calls, output ? output : "standard output");
}

/* ---- verb --------------------------------------------------------------------------------- */

struct export_opts {
	const char *format, *output, *node;
	int64_t run;
	bool all_runs, no_merge;
};

static const char EXPORT_HELP[] =
	"Usage: ffmctl export <jobid> --format chrome-trace|hatchet [--run ID | --all-runs] "
	"[--no-merge] [--node NAME] [-o FILE[.gz]]\n"
	"\n"
	"A job's recorded events for other tools (docs/REPORT.md documents both formats).\n"
	"\n"
	"Options:\n"
	"  --format chrome-trace|hatchet\n"
	"                  chrome-trace: the Trace Event Format Perfetto opens, one track per\n"
	"                  run, problems in red; hatchet: the call tree for Hatchet\n"
	"  --run ID        export this run only (default: the run the report's figures come\n"
	"                  from)\n"
	"  --all-runs      chrome-trace: every run of the job, one process track each\n"
	"  --no-merge      chrome-trace: one event per call (default: a run of identical calls\n"
	"                  of a thread is one span with its count)\n"
	"  --node NAME     the node whose store to export, for a job that ran on several\n"
	"  -o, --output FILE\n"
	"                  write to FILE instead of standard output; gzip when it ends in .gz\n";

/* The options into @o; -1 to go on, else the exit code (said why). */
static int parse_opts(int argc, char **argv, struct export_opts *o)
{
	static const struct option opts[] = {
		{ "format", required_argument, NULL, 'f' },
		{ "run", required_argument, NULL, 'r' },
		{ "all-runs", no_argument, NULL, 'a' },
		{ "no-merge", no_argument, NULL, 'm' },
		{ "output", required_argument, NULL, 'o' },
		{ "node", required_argument, NULL, 'n' },
		{ "help", no_argument, NULL, 'h' },
		{},
	};
	char *end;
	int c;

	while ((c = getopt_long(argc, argv, ":f:r:o:n:h", opts, NULL)) != -1) {
		switch (c) {
		case 'f':
			if (strcmp(optarg, "chrome-trace") && strcmp(optarg, "hatchet")) {
				ffmctl_err("export", "--format must be chrome-trace or hatchet, not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			o->format = optarg;
			break;
		case 'r':
			errno = 0;
			o->run = strtoll(optarg, &end, 10);
			if (errno || end == optarg || *end || o->run <= 0) {
				ffmctl_err("export", "--run wants a run id (see ffmctl report --json), not '%s'",
					   optarg);
				return EXIT_USAGE;
			}
			break;
		case 'a':
			o->all_runs = true;
			break;
		case 'm':
			o->no_merge = true;
			break;
		case 'o':
			o->output = optarg;
			break;
		case 'n':
			o->node = optarg;
			break;
		case 'h':
			fputs(EXPORT_HELP, stdout);
			return EXIT_OK;
		default:
			return ffmctl_opt_err("export", c, argv);
		}
	}
	if (ffmctl_one_jobid("export", argc, argv))
		return EXIT_USAGE;
	if (!o->format) {
		ffmctl_err("export", "--format chrome-trace or --format hatchet is required");
		return EXIT_USAGE;
	}
	if (o->run && o->all_runs) {
		ffmctl_err("export", "--run and --all-runs exclude each other");
		return EXIT_USAGE;
	}
	if ((o->all_runs || o->no_merge) && strcmp(o->format, "chrome-trace")) {
		ffmctl_err("export", "--all-runs and --no-merge are options of --format chrome-trace");
		return EXIT_USAGE;
	}
	return -1;
}

/* The job's runs into e->runs, @o->run checked. Returns an exit code, -1 to go on. */
static int load_runs(struct exp *e, struct export_opts *o)
{
	bool found = false;
	int err;

	if ((err = ffm_store__for_each_run(e->s, on_run, e)) < 0 ||
	    (err = ffm_store__for_each_api_name(e->s, on_api, e)) < 0) {
		ffmctl_err("export", "reading %s: %s", ffm_store__path(e->s), ffm_store__strerror(err));
		return EXIT_FAIL;
	}
	for (int i = 0; i < e->nruns; i++)
		found |= e->runs[i].id == o->run;
	if (o->run && !found) {
		ffmctl_err("export", "job %s has no run %" PRId64, e->job_id, o->run);
		return EXIT_USAGE;
	}
	if (!o->run && !strcmp(o->format, "hatchet") && !(o->run = default_tree_run(e))) {
		ffmctl_err("export", "job %s has no ended stage-1 or stage-2 run to build a call tree "
			   "from (pick one with --run)", e->job_id);
		return EXIT_FAIL;
	}
	if (!e->nruns) {
		ffmctl_err("export", "job %s has no runs yet", e->job_id);
		return EXIT_FAIL;
	}
	return -1;
}

/* Write the export through a temporary file renamed at the end. 0 or -errno. */
static int write_export(struct exp *e, const struct export_opts *o, struct sink *k)
{
	char tmp[PATH_MAX];
	struct stat st;
	/* Not a file to replace (-o /dev/null, a FIFO): renaming over it would put a regular
	 * file in the device's place. */
	bool direct = o->output && stat(o->output, &st) == 0 && !S_ISREG(st.st_mode) &&
		      !S_ISDIR(st.st_mode);
	const char *path = direct ? o->output : tmp;
	int err;

	if (o->output && snprintf(tmp, sizeof(tmp), "%s.tmp.%d", o->output, (int)getpid()) >=
			 (int)sizeof(tmp))
		return -ENAMETOOLONG;
	if ((err = sink_open(e, k, o->output ? path : NULL,
				o->output && ends_with(o->output, ".gz"), direct)) < 0) {
		ffmctl_err("export", "cannot create %s: %s", o->output ? path : "the output",
			   strerror(-err));
		return 1; /* said */
	}
	if (!strcmp(o->format, "hatchet")) {
		atomic_store(&e->pr->an.phase, "building the call tree");
		err = export_hatchet(e, o->run);
	} else {
		err = export_trace(e, o->run, o->all_runs);
	}
	if (!err && e->err)
		err = e->err;
	if (fflush(e->out) || ferror(e->out) || k->err)
		err = err ? err : k->err ? k->err : -EIO;
	if (fclose(e->out) && !err)
		err = -EIO;
	e->out = NULL;
	if (o->output && !direct && !err && rename(tmp, o->output) < 0)
		err = -errno;
	if (o->output && !direct && err)
		unlink(tmp);
	return err;
}

int ffmctl_export(int argc, char **argv)
{
	struct export_opts o = {};
	struct ffmctl_progress pr;
	struct sink k = {};
	struct exp *e;
	int err, r = parse_opts(argc, argv, &o);

	if (r >= 0)
		return r;
	e = calloc(1, sizeof(*e));
	if (!e) {
		ffmctl_err("export", "out of memory");
		return EXIT_FAIL;
	}
	e->job_id = argv[optind];
	e->merge = !o.no_merge;
	e->stacks = OATAB_INIT(struct stack_info);
	e->apis = OATAB_INIT(struct api_name);
	e->seen = OATAB_INIT(struct oa_key);
	e->open = OATAB_INIT(struct span);
	e->site_of = OATAB_U32_INIT;
	r = open_store(e, o.node);
	if (r != EXIT_OK || (r = load_runs(e, &o)) >= 0)
		goto out;
	ffmctl_progress__start(&pr, "export", e->job_id);
	e->pr = &pr;
	err = write_export(e, &o, &k);
	ffmctl_progress__stop(&pr);
	r = EXIT_FAIL;
	if (err < 0)
		ffmctl_err("export", "writing the %s export of job %s failed: %s", o.format, e->job_id,
			   ffm_store__strerror(err));
	if (err)
		goto out;
	if (strcmp(o.format, "hatchet"))
		say_runs(e);
	say_written(e, &k, o.format, o.output);
	r = EXIT_OK;
out:
	free_exp(e);
	free(e);
	return r;
}
