/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bpf/ffm_hash.h"
#include "common/ffm_json.h"
#include "common/util.h"
#include "daemon/collector.h"
#include "daemon/jobrun.h"
#include "daemon/memtrace.h"
#include "daemon/pytrack.h"
#include "store/ffm_store.h"

struct ffm_jobrun {
	struct ffm_jobrun_opts o;
	struct ffm_store *store;
	struct ffm_recorder *rec;
	struct ffm_plan plan;
	int64_t run;
	char **sync_names;
	size_t nsync, cap_sync;
	char job_id[128], key[128];
	bool ended;
	struct ffm_memtrace *mt; /* stages 3-4 */
	int64_t ref_run2;        /* the key's latest stage-2 run, for FFM_RUN_DIVERGENT */
	uint32_t unmeasured;     /* processes whose calls were not measured (set_unmeasured) */
	bool interrupted;        /* part of the job ran unseen (set_interrupted) */
	char root[4096 + 256];   /* the store root of this node (FFM_STATE_ROOT) */
	struct ffm_run_limits lim;
	/* store growth: bytes at the start, added since (last measured), records seen */
	uint64_t base_bytes, added, nrec;
	bool full;
	struct ffm_jobrun *next_active; /* the runs of this process, for a user's bytes */
	struct ffm_overhead price;          /* what its processes paid, per part (ffm_jobrun__overhead) */
	uint32_t extra_flags;            /* run flags its owner adds (ffm_jobrun__set_flags) */
	/* Its end, from ffm_jobrun__end or __end_async until the run is closed (end_finish). */
	struct {
		uint64_t ns;
		double wall_s;
		int exit_status;
		uint32_t flags;
		bool aborted, end_job;
		ffm_jobrun_ended_fn done; /* an end that does not wait (NULL: one that does) */
		void *ctx;
	} end;
};

/* Every run of this process between begin and free (ffmd's loop, or ffmctl profile's: one
 * thread), so that a user's bytes are the sum of their runs'. */
static struct ffm_jobrun *active_runs;

/* Records between two reads of a store's size (two stat calls): it may pass its bytes by this
 * many records and the batch not yet committed (store/ffm_store.h, Durability). */
#define MEASURE_EVERY 256

/* The store's bytes on disk: the file and its write-ahead log. */
static uint64_t store_bytes(struct ffm_jobrun *jr)
{
	const char *path = ffm_store__path(jr->store);
	char wal[4096 + 8];
	struct stat st;
	uint64_t n = 0;

	if (!path)
		return 0;
	if (stat(path, &st) == 0)
		n += (uint64_t)st.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", path);
	if (stat(wal, &st) == 0)
		n += (uint64_t)st.st_size;
	return n;
}

static uint64_t user_added(uint32_t uid)
{
	uint64_t n = 0;

	for (struct ffm_jobrun *r = active_runs; r; r = r->next_active)
		if (r->o.uid == uid)
			n += r->added;
	return n;
}

/* Measure the store now and then; past the run's or its user's bytes, stop storing. */
static void measure_store(struct ffm_jobrun *jr)
{
	uint64_t size;

	if (jr->full || (++jr->nrec % MEASURE_EVERY) || (!jr->lim.store_bytes &&
							  !jr->lim.user_store_bytes))
		return;
	size = store_bytes(jr);
	jr->added = size > jr->base_bytes ? size - jr->base_bytes : 0;
	if ((jr->lim.store_bytes && jr->added >= jr->lim.store_bytes) ||
	    (jr->lim.user_store_bytes && user_added(jr->o.uid) >= jr->lim.user_store_bytes)) {
		jr->full = true;
		ffm_recorder__full(jr->rec);
	}
}

void ffm_jobrun__set_unmeasured(struct ffm_jobrun *jr, uint32_t nprocs)
{
	jr->unmeasured = nprocs;
}

void ffm_jobrun__set_interrupted(struct ffm_jobrun *jr)
{
	jr->interrupted = true;
}

uint64_t ffm_args_hash(char *const *argv)
{
	uint64_t h = FFM_FNV1A_INIT;

	for (; argv && *argv; argv++)
		h = ffm_fnv1a(h, *argv, strlen(*argv) + 1);
	return h;
}

void ffm_job_key(uint32_t uid, const char *exe, char *const *argv, char *buf, size_t len)
{
	uint64_t h = FFM_FNV1A_INIT, a = ffm_args_hash(argv);

	h = ffm_fnv1a(h, &uid, sizeof(uid));
	h = ffm_fnv1a(h, exe ? exe : "", exe ? strlen(exe) + 1 : 1);
	h = ffm_fnv1a(h, &a, sizeof(a));
	snprintf(buf, len, "%016llx", (unsigned long long)h);
}

void ffm_job_key_exec(uint32_t uid, const char *comm, uint64_t args_hash, char *buf, size_t len)
{
	uint64_t h = FFM_GOLDEN64; /* not ffm_job_key's seed: the two never collide by design */
	char c[17] = "";

	snprintf(c, sizeof(c), "%.16s", comm ? comm : "");
	h = ffm_fnv1a(h, &uid, sizeof(uid));
	h = ffm_fnv1a(h, c, strlen(c) + 1);
	h = ffm_fnv1a(h, &args_hash, sizeof(args_hash));
	snprintf(buf, len, "%016llx", (unsigned long long)h);
}

uint64_t ffm_args_block_hash(const void *block, size_t len)
{
	return ffm_fnv1a(FFM_FNV1A_INIT, block, len < FFM_ARGS_HASH_MAX ? len : FFM_ARGS_HASH_MAX);
}

/* FFM_CPU_SAMPLE_HZ in ffmd's (or ffmctl profile's) environment: the CPU samples' rate, 0 for
 * none (what bench/gpu compares against); 1..10000. */
static unsigned cpu_sample_hz(void)
{
	const char *e = getenv("FFM_CPU_SAMPLE_HZ");
	char *end;
	unsigned long v;

	if (!e || !*e)
		return FFM_PYTRACK_SAMPLE_HZ;
	v = strtoul(e, &end, 10);
	return *end || v > 10000 ? FFM_PYTRACK_SAMPLE_HZ : (unsigned)v;
}

/* One of stage 1's public functions that waited (ffm_store__for_each_wait_api). */
static int add_sync_name(uint32_t api, const char *name, void *ctx)
{
	struct ffm_jobrun *jr = ctx;
	char *n = strdup(name);

	if (!n || FFM_GROW(jr->sync_names, jr->cap_sync, jr->nsync + 1)) {
		free(n);
		return -ENOMEM;
	}
	jr->sync_names[jr->nsync++] = n;
	return 0;
}

/* jr->store: the key's store under this node's (@node's) part of the state directory, or the
 * one opts->store shares: 0, or < 0 when it failed. */
static int open_store(struct ffm_jobrun *jr, const struct ffm_jobrun_opts *opts, const char *node)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .create = true, .tool_version = "ffm 0.1" };
	struct ffm_store_key key = { .key = opts->key, .uid = opts->uid, .exe = opts->exe,
				     .args_hash = opts->args_hash };
	int err;

	/* Where this node keeps its stores (store/ffm_store.h: the state directory). */
	err = ffm_state_path(opts->state_dir, FFM_STATE_ROOT, node, jr->root, sizeof(jr->root));
	if (err < 0)
		return err;
	/* Another run of the key going on in this process: the same connection, since a second
	 * one would wait on the first's open write transaction, which only this thread ends. */
	if (opts->store) {
		jr->store = ffm_store__ref(opts->store);
		return 0;
	}
	return ffm_store__open_key(jr->root, &key, &so, &jr->store);
}

/* jr->plan: the stage and probes of this run, from the key's past runs (@hist), and stage 1's
 * list of public functions that waited: 0, or < 0 when it failed. */
static int plan_run(struct ffm_jobrun *jr, const struct ffm_jobrun_opts *opts,
		    struct ffm_store_stage_history *hist)
{
	struct ffm_plan_input in;
	int err;

	err = ffm_plan__input(jr->store, opts->override_stage, &in, hist);
	if (err < 0)
		return err;
	err = ffm_plan__next(&in, &jr->plan);
	if (err < 0)
		return err;
	/* Stage 1's list of public functions that waited, from the key's latest stage-1 run. */
	err = ffm_store__for_each_wait_api(jr->store, hist->last_run[1], add_sync_name, jr);
	if (err < 0)
		return err;
	if (jr->plan.probes & FFM_PROBE_SYNC_FUNCS && !jr->nsync && !hist->last_run[1])
		jr->plan.probes |= FFM_PROBE_SYNC_STATIC;
	return 0;
}

/* The job (running, on @node), the driver and the run (jr->run) written to the store: 0, or
 * < 0 when it failed. */
static int store_run(struct ffm_jobrun *jr, const struct ffm_jobrun_opts *opts, const char *node)
{
	int64_t driver = 0;
	int err;

	err = ffm_store__job_begin(jr->store, &(struct ffm_store_job){
		.job_id = opts->job_id, .uid = opts->uid, .state = FFM_JOB_RUNNING,
		.start_unix = time(NULL), .node = node,
	}, NULL);
	if (err < 0)
		return err;
	if (opts->driver_build_id && *opts->driver_build_id) {
		err = ffm_store__put_driver(jr->store, &(struct ffm_store_driver){
			.path = opts->driver_path, .build_id = opts->driver_build_id,
			.wait_off = opts->wait_off, .wait_size = opts->wait_size,
			.node_model = opts->driver_node_model,
		}, &driver);
		if (err < 0)
			return err;
	}
	return ffm_store__run_begin(jr->store, &(struct ffm_store_run){
		.job_id = opts->job_id, .stage = jr->plan.stage, .driver = driver,
		.start_ns = ffm_now_ns(), .start_unix = time(NULL),
	}, &jr->run);
}

/* jr->mt, the memory tracer of stages 3 and 4 (@hist: the runs whose stacks it starts from):
 * 0, or < 0 when it failed. */
static int open_memtrace(struct ffm_jobrun *jr, const struct ffm_jobrun_opts *opts,
			 const struct ffm_store_stage_history *hist)
{
	/* Stage 4 watches only what stage 3 saw used (none: an empty list, not NULL). */
	int64_t *use = NULL, none = 0;
	size_t nuse = 0;
	int err = 0;

	if (jr->plan.stage == FFM_STAGE_SYNC_USE)
		err = ffm_store__used_dst_stacks(jr->store, hist->last_run[FFM_STAGE_MEMORY],
						 &use, &nuse);
	if (err >= 0)
		err = ffm_memtrace__new(&(struct ffm_memtrace_opts){
			.sz = sizeof(struct ffm_memtrace_opts), .store = jr->store, .run = jr->run,
			.collector = opts->collector, .stage = jr->plan.stage,
			.use_stacks = jr->plan.stage == FFM_STAGE_SYNC_USE ? (use ? use : &none) : NULL,
			.nuse_stacks = nuse,
		}, &jr->mt);
	free(use);
	if (err < 0)
		return err;
	jr->ref_run2 = hist->last_run[FFM_STAGE_DETAIL];
	return 0;
}

int ffm_jobrun__begin(const struct ffm_jobrun_opts *opts, struct ffm_jobrun **ret)
{
	struct ffm_store_stage_history hist;
	struct ffm_recorder_opts ro = { .sz = sizeof(ro), .collector = opts->collector, .sym = opts->sym,
					.unwinder = opts->unwinder,
					.apis = opts->apis, .proc_root = opts->proc_root,
					.driver_build_id = opts->driver_build_id };
	struct ffm_jobrun *jr;
	char host[256] = "";
	const char *node;
	int err;

	*ret = NULL;
	jr = calloc(1, sizeof(*jr));
	if (!jr)
		return -ENOMEM;
	jr->o = *opts;
	jr->lim = opts->limits ? *opts->limits : FFM_RUN_LIMITS_DEFAULT;
	jr->o.limits = &jr->lim;
	snprintf(jr->job_id, sizeof(jr->job_id), "%s", opts->job_id);
	jr->o.job_id = jr->job_id;
	/* Both outlive the caller's: the run may end after its job's slot is used again. */
	snprintf(jr->key, sizeof(jr->key), "%s", opts->key ? opts->key : "");
	jr->o.key = jr->key;
	gethostname(host, sizeof(host) - 1);
	node = opts->node ? opts->node : host;
	err = open_store(jr, opts, node);
	if (err >= 0)
		err = plan_run(jr, opts, &hist);
	if (err >= 0)
		err = store_run(jr, opts, node);
	if (err >= 0 && ffm_memtrace_job_flags(jr->plan.probes) & FFM_JOB_MEMTRACE)
		err = open_memtrace(jr, opts, &hist);
	if (err < 0)
		goto fail;
	ro.store = jr->store;
	ro.run = jr->run;
	ro.memtrace = jr->mt;
	if (jr->plan.probes & FFM_PROBE_CPU_SAMPLE)
		ro.cpu_sample_hz = cpu_sample_hz();
	ro.limits = &jr->lim;
	ro.price = &jr->price;
	err = ffm_recorder__new(&ro, &jr->rec);
	if (err < 0)
		goto fail;
	jr->base_bytes = store_bytes(jr);
	jr->next_active = active_runs;
	active_runs = jr;
	*ret = jr;
	return 0;
fail:
	ffm_jobrun__free(jr);
	return err;
}

const struct ffm_plan *ffm_jobrun__plan(const struct ffm_jobrun *jr)
{
	return &jr->plan;
}

int64_t ffm_jobrun__run_id(const struct ffm_jobrun *jr)
{
	return jr->run;
}

struct ffm_store *ffm_jobrun__store(struct ffm_jobrun *jr)
{
	return jr->store;
}

struct ffm_recorder *ffm_jobrun__recorder(struct ffm_jobrun *jr)
{
	return jr->rec;
}

struct ffm_memtrace *ffm_jobrun__memtrace(struct ffm_jobrun *jr)
{
	return jr->mt;
}

uint32_t ffm_jobrun__job_flags(const struct ffm_jobrun *jr)
{
	/* A monitoring run that times copies keeps stage 1's records and adds the calls'. */
	return FFM_JOB_ACTIVE | FFM_JOB_STACKS | (jr->plan.stage >= 2 ? FFM_JOB_CALLS : 0) |
	       (ffm_plan__times_copies(&jr->plan) ? FFM_JOB_CALLS | FFM_JOB_WAITS_ALONE : 0) |
	       (jr->plan.probes & FFM_PROBE_CPU_SAMPLE ? FFM_JOB_CPU_SAMPLE : 0) |
	       ffm_memtrace_job_flags(jr->plan.probes);
}

int ffm_jobrun__arm(struct ffm_jobrun *jr)
{
	struct ffm_job_cfg cfg = { .stage = (uint32_t)jr->plan.stage, .flags = ffm_jobrun__job_flags(jr) };

	ffm_collector__clear_drops(jr->o.collector, jr->o.slot);
	return ffm_collector__set_job(jr->o.collector, jr->o.slot, &cfg);
}

int ffm_jobrun__disarm(struct ffm_jobrun *jr)
{
	struct ffm_job_cfg off = {};

	return ffm_collector__set_job(jr->o.collector, jr->o.slot, &off);
}

const char *const *ffm_jobrun__sync_names(const struct ffm_jobrun *jr, size_t *n)
{
	*n = jr->nsync;
	return (const char *const *)jr->sync_names;
}

int ffm_jobrun__record(struct ffm_jobrun *jr, const void *rec, size_t size)
{
	measure_store(jr);
	return ffm_recorder__record(jr->rec, rec, size);
}

/* The end's first part, at the end's call: what the collector counted for the run's slot (the
 * slot serves another run next), and the end's parameters. */
static void end_begin(struct ffm_jobrun *jr, double wall_s, int exit_status, bool aborted,
		      bool end_job)
{
	struct ffm_rec_drops d = {};

	jr->ended = true;
	jr->end.ns = ffm_now_ns();
	jr->end.wall_s = wall_s;
	jr->end.exit_status = exit_status;
	jr->end.aborted = aborted;
	jr->end.end_job = end_job;
	if (jr->o.collector && ffm_collector__drops(jr->o.collector, jr->o.slot, &d) == 0) {
		static const int map[FFM_REC_DROP__MAX] = {
			[FFM_REC_DROP_RINGBUF] = FFM_DROP_RINGBUF_FULL,
			[FFM_REC_DROP_STACK] = FFM_DROP_RINGBUF_FULL,
			[FFM_REC_DROP_DEPTH] = FFM_DROP_STACK_TOO_DEEP,
			[FFM_REC_DROP_PROCS] = FFM_DROP_MAP_FULL,
			[FFM_REC_DROP_THREADS] = FFM_DROP_MAP_FULL,
			[FFM_REC_DROP_UNMATCHED] = FFM_DROP_OTHER,
			[FFM_REC_DROP_QUOTA] = FFM_DROP_PROCS_QUOTA,
		};

		for (int i = 0; i < FFM_REC_DROP__MAX; i++) {
			if (!d.n[i])
				continue;
			ffm_store__add_drops(jr->store, jr->run, map[i], d.n[i]);
			/* Entries without returns are expected when a process dies mid-call;
			 * only lost records make the run's data incomplete. */
			if (i != FFM_REC_DROP_UNMATCHED && i != FFM_REC_DROP_DEPTH)
				jr->end.flags |= FFM_RUN_DROPPED;
		}
	}
	if (jr->o.collector) {
		struct ffm_bpf_overhead bp;

		if (ffm_collector__bpf_overhead(jr->o.collector, jr->o.slot, &bp) == 0) {
			jr->price.ns[FFM_OVERHEAD_BPF] += bp.ns;
			jr->price.n[FFM_OVERHEAD_BPF] += bp.runs;
		}
		ffm_collector__clear_drops(jr->o.collector, jr->o.slot);
	}
}

/* The run's flags from what the recorder and the run's owner counted. */
static uint32_t end_flags(struct ffm_jobrun *jr)
{
	struct ffm_recorder_stats st;
	uint32_t flags = jr->end.flags | jr->extra_flags;

	ffm_recorder__stats(jr->rec, &st);
	if (st.unknown_keys) {
		ffm_store__add_drops(jr->store, jr->run, FFM_DROP_OTHER, st.unknown_keys);
		flags |= FFM_RUN_DROPPED;
	}
	/* The run's bounds: stacks left out cost the calls their stack only; records not
	 * stored are lost. */
	if (st.stacks_capped)
		ffm_store__add_drops(jr->store, jr->run, FFM_DROP_STACK_CAP, st.stacks_capped);
	if (st.not_stored) {
		ffm_store__add_drops(jr->store, jr->run, FFM_DROP_STORE_CAP, st.not_stored);
		flags |= FFM_RUN_DROPPED;
	}
	if (jr->end.aborted)
		flags |= FFM_RUN_ABORTED;
	if (jr->unmeasured) {
		/* Counted as lost records of no known kind: the report must not call this good. */
		ffm_store__add_drops(jr->store, jr->run, FFM_DROP_OTHER, jr->unmeasured);
		flags |= FFM_RUN_PARTIAL | FFM_RUN_DROPPED;
	}
	if (jr->interrupted)
		flags |= FFM_RUN_PARTIAL | FFM_RUN_ABORTED;
	if (jr->plan.reason == FFM_PLAN_DRIFT)
		flags |= FFM_RUN_RETRACE; /* stages 3-4 follow it again */
	if (ffm_plan__times_copies(&jr->plan))
		flags |= FFM_RUN_COPIES;
	return flags;
}

/* The end's second part, once the recorder has stored every record of the run (it waits for
 * none when idle): the run, and the job if asked, closed in the store. */
static int end_finish(struct ffm_jobrun *jr)
{
	double wall_s = jr->end.wall_s;
	uint64_t lo, hi;
	uint32_t flags;
	int err;

	/* First: the stacks still being unwound and the records held behind them are stored. */
	err = ffm_recorder__end(jr->rec);
	if (err < 0)
		return err;
	flags = end_flags(jr);
	if (jr->mt) {
		/* Windows still open end with the run; then coverage and divergence flags. */
		err = ffm_memtrace__end(jr->mt, jr->ref_run2, &flags);
		if (err < 0)
			return err;
	}
	/* The wall time is the processes' lifetime, not the job's: a scheduler's job starts
	 * before its program and ends after it. */
	if (ffm_store__flush(jr->store) >= 0 &&
	    ffm_store__run_procs_span(jr->store, jr->run, jr->end.ns, &lo, &hi) == 0 && hi > lo)
		wall_s = (double)(hi - lo) / 1e9;
	err = ffm_store__put_overhead(jr->store, jr->run, &jr->price);
	if (err < 0)
		return err;
	err = ffm_store__run_end(jr->store, jr->run, jr->end.ns, wall_s, jr->end.exit_status, flags);
	if (err < 0)
		return err;
	if (jr->end.end_job) {
		err = ffm_store__job_end(jr->store, jr->job_id,
					 jr->end.aborted ? FFM_JOB_CANCELLED :
					 jr->end.exit_status ? FFM_JOB_FAILED : FFM_JOB_DONE,
					 time(NULL));
		if (err < 0)
			return err;
	}
	return ffm_store__flush(jr->store);
}

int ffm_jobrun__end(struct ffm_jobrun *jr, double wall_s, int exit_status, bool aborted,
		    bool end_job)
{
	if (jr->ended)
		return 0;
	end_begin(jr, wall_s, exit_status, aborted, end_job);
	return end_finish(jr);
}

/* An end that did not wait: closed now, told, freed. */
static void end_done(void *arg)
{
	struct ffm_jobrun *jr = arg;
	int err = end_finish(jr);

	jr->end.done(jr, err, jr->end.ctx);
	ffm_jobrun__free(jr);
}

int ffm_jobrun__end_async(struct ffm_jobrun *jr, double wall_s, int exit_status, bool aborted,
			  bool end_job, ffm_jobrun_ended_fn done, void *ctx)
{
	int ending = 0;

	if (jr->ended)
		return -EALREADY;
	for (struct ffm_jobrun *r = active_runs; r; r = r->next_active)
		ending += r->end.done != NULL;
	end_begin(jr, wall_s, exit_status, aborted, end_job);
	jr->end.done = done;
	jr->end.ctx = ctx;
	/* Past FFM_JOBRUN_MAX_ENDING it waits (end_finish drains): the unwinder's queue holds one
	 * request of each run, ending or not. */
	if (ffm_recorder__idle(jr->rec) || ending >= FFM_JOBRUN_MAX_ENDING) {
		end_done(jr);
		return 0;
	}
	ffm_recorder__on_idle(jr->rec, end_done, jr);
	return 1;
}

void ffm_jobrun__finish_ending(void)
{
	struct ffm_jobrun *jr;

	do {
		/* From the list's head each time: a drain may finish (and free) others. */
		for (jr = active_runs; jr && !jr->end.done; jr = jr->next_active)
			;
		if (jr)
			end_done(jr); /* drains: its on_idle is cleared first */
	} while (jr);
}

struct ffm_store *ffm_jobrun__store_of_key(const char *key)
{
	for (struct ffm_jobrun *jr = active_runs; jr; jr = jr->next_active)
		if (!strcmp(jr->key, key))
			return jr->store;
	return NULL;
}

bool ffm_jobrun__ending(const char *job_id)
{
	for (struct ffm_jobrun *jr = active_runs; jr; jr = jr->next_active)
		if (jr->end.done && !strcmp(jr->job_id, job_id))
			return true;
	return false;
}

const char *ffm_jobrun__job_id(const struct ffm_jobrun *jr)
{
	return jr->job_id;
}

const char *ffm_jobrun__key(const struct ffm_jobrun *jr)
{
	return jr->key;
}

uint32_t ffm_jobrun__uid(const struct ffm_jobrun *jr)
{
	return jr->o.uid;
}

struct ffm_overhead *ffm_jobrun__overhead(struct ffm_jobrun *jr)
{
	return &jr->price;
}

json_t *ffm_overhead_json(const struct ffm_overhead *p, double run_s)
{
	json_t *parts = json_object(), *o;
	double proc_ns = 0, ffmd_ns = 0;

	for (int i = 0; i < FFM_OVERHEAD_N; i++) {
		json_object_set_new(parts, ffm_overhead_part_name(i),
				    json_pack("{s:o,s:I}", "ms", ffm_json_fixed(p->ns[i] / 1e6, 3),
					      "count", (json_int_t)p->n[i]));
		*(i < FFM_OVERHEAD_FFMD ? &proc_ns : &ffmd_ns) += (double)p->ns[i];
	}
	o = json_pack("{s:o,s:o,s:o,s:o}", "parts", parts, "process_ms",
		      ffm_json_fixed(proc_ns / 1e6, 3), "ffmd_ms", ffm_json_fixed(ffmd_ns / 1e6, 3),
		      "cost_pct", ffm_json_fixed(run_s > 0 ? proc_ns / 1e9 / run_s * 100 : 0, 4));
	return o;
}

void ffm_jobrun__set_flags(struct ffm_jobrun *jr, uint32_t flags)
{
	jr->extra_flags |= flags;
}

const char *ffm_jobrun__root(const struct ffm_jobrun *jr)
{
	return jr->root;
}

struct ffm_jobrun *ffm_jobrun__free(struct ffm_jobrun *jr)
{
	if (!jr)
		return NULL;
	for (struct ffm_jobrun **p = &active_runs; *p; p = &(*p)->next_active)
		if (*p == jr) {
			*p = jr->next_active;
			break;
		}
	ffm_recorder__free(jr->rec);
	ffm_memtrace__free(jr->mt);
	ffm_store__free(jr->store);
	for (size_t i = 0; i < jr->nsync; i++)
		free(jr->sync_names[i]);
	free(jr->sync_names);
	free(jr);
	return NULL;
}
