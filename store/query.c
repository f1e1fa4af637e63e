/* SPDX-License-Identifier: MIT */
/*
 * Reads for the report, the analysis and the stage plan. Iterations prepare their own statement
 * (so a callback may run other queries on the same store) and step it row by row: memory does
 * not grow with the number of rows. Strings handed to callbacks point into SQLite's row buffer.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "store/store_int.h"

struct ffm_store_cursor {
	struct ffm_store *s;
	sqlite3_stmt *st;
	int64_t run;
	bool timing; /* lean rows: the timing columns of events_sql */
};

static int prepare(struct ffm_store *s, const char *sql, sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);

	return rc == SQLITE_OK ? 0 : ffm_store_err(s->db, rc);
}

/* Step st, calling row(st, ...) per row; finalizes st. Returns 0, cb's nonzero or -errno. */
static int each_row(struct ffm_store *s, sqlite3_stmt *st, int (*row)(sqlite3_stmt *, void *),
		    void *arg)
{
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		r = row(st, arg);
		if (r)
			break;
	}
	if (!r && rc != SQLITE_DONE)
		r = ffm_store_err(s->db, rc);
	sqlite3_finalize(st);
	return r;
}

static const char *col_text(sqlite3_stmt *st, int i)
{
	return (const char *)sqlite3_column_text(st, i);
}

/* Integer column @i; an unsigned or narrower field takes its bits as stored. */
static int64_t col(sqlite3_stmt *st, int i)
{
	return sqlite3_column_int64(st, i);
}

struct cb_arg {
	void *cb;
	void *ctx;
	struct ffm_store *s;
};

/* One query: prepare, bind *@param (if any) as ?1, call row(st, cb_arg) per row. */
static int rows_of(struct ffm_store *s, const char *sql, const int64_t *param,
		   int (*row)(sqlite3_stmt *, void *), void *cb, void *ctx)
{
	struct cb_arg a = { cb, ctx, s };
	sqlite3_stmt *st;
	int err = prepare(s, sql, &st);

	if (err)
		return err;
	if (param)
		sqlite3_bind_int64(st, 1, *param);
	return each_row(s, st, row, &a);
}

/* ---- jobs and runs ---------------------------------------------------------------------- */

static int node_model_row(sqlite3_stmt *st, void *arg)
{
	char **json = ((struct cb_arg *)arg)->ctx;
	const char *t = col_text(st, 0);

	if (!t)
		return 0;
	*json = strdup(t);
	return *json ? 1 : -ENOMEM;
}

static int thread_waits_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;

	return ((ffm_store_thread_waits_cb)a->cb)((uint32_t)col(st, 0), (uint32_t)col(st, 1),
						  (uint64_t)col(st, 2), (uint64_t)col(st, 3),
						  a->ctx);
}

int ffm_store__for_each_thread_waits(struct ffm_store *s, int64_t run,
				     ffm_store_thread_waits_cb cb, void *ctx)
{
	if (s->version < 12) /* counted since v12 */
		return 0;
	return rows_of(s, "SELECT tgid, tid, waits, waits_slept FROM threads WHERE run = ?1"
		       " AND waits > 0", &run, thread_waits_row, (void *)cb, ctx);
}

static int managed_faults_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;

	return ((ffm_store_managed_faults_cb)a->cb)(col(st, 0), (uint64_t)col(st, 1),
						    (uint64_t)col(st, 2), a->ctx);
}

int ffm_store__for_each_managed_faults(struct ffm_store *s, int64_t run,
				       ffm_store_managed_faults_cb cb, void *ctx)
{
	if (s->version < 13) /* counted since v13 */
		return 0;
	return rows_of(s, "SELECT stack, ops, faults FROM managed_faults WHERE run = ?1", &run,
		       managed_faults_row, (void *)cb, ctx);
}

int ffm_store__run_node_model(struct ffm_store *s, int64_t run, char **json)
{
	int err;

	*json = NULL;
	if (s->version < 12) /* the column came with v12 */
		return -ENOENT;
	err = rows_of(s, "SELECT d.node_model FROM runs r JOIN drivers d ON d.id = r.driver"
		      " WHERE r.id = ?1", &run, node_model_row, NULL, json);
	if (err < 0)
		return err;
	return *json ? 0 : -ENOENT;
}

static int job_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_key k = { 0 };
	struct ffm_store_job_info j = {
		.id = col(st, 0), .job_id = col_text(st, 1), .uid = col(st, 2), .state = col(st, 3),
		.start_unix = col(st, 4), .end_unix = col(st, 5), .node = col_text(st, 6),
		.runs = col(st, 7), .stages_done = col(st, 8),
	};

	if (ffm_store__key(a->s, &k) == 0)
		j.key = k.key;
	return ((ffm_store_job_cb)a->cb)(&j, a->ctx);
}

int ffm_store__for_each_job(struct ffm_store *s, ffm_store_job_cb cb, void *ctx)
{
	/* stages_done: OR of 1 << stage over ended runs (SQLite has no bit_or aggregate, but
	 * distinct powers of two add up to the same). */
	return rows_of(s,
		       "SELECT j.id, j.job_id, j.uid, j.state, j.start_unix, j.end_unix, j.node,"
		       " (SELECT count(*) FROM runs r WHERE r.job = j.id),"
		       " (SELECT coalesce(sum(b), 0) FROM (SELECT DISTINCT 1 << r.stage AS b FROM runs r"
		       "   WHERE r.job = j.id AND r.end_ns != 0))"
		       " FROM jobs j ORDER BY j.start_unix, j.id",
		       NULL, job_row, (void *)cb, ctx);
}

#define RUN_COLS                                                                                   \
	"r.id, j.job_id, r.stage, r.driver, r.start_ns, r.end_ns, r.start_unix, r.wall_s,"         \
	" r.exit_status, r.flags FROM runs r JOIN jobs j ON j.id = r.job"

static void run_of_row(sqlite3_stmt *st, struct ffm_store_run *r)
{
	*r = (struct ffm_store_run){
		.id = col(st, 0), .job_id = col_text(st, 1), .stage = col(st, 2),
		.driver = col(st, 3), .start_ns = col(st, 4), .end_ns = col(st, 5),
		.start_unix = col(st, 6), .wall_s = sqlite3_column_double(st, 7),
		.exit_status = col(st, 8), .flags = col(st, 9),
	};
}

static int run_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_run r;

	run_of_row(st, &r);
	return ((ffm_store_run_cb)a->cb)(&r, a->ctx);
}

int ffm_store__for_each_run(struct ffm_store *s, ffm_store_run_cb cb, void *ctx)
{
	return rows_of(s, "SELECT " RUN_COLS " ORDER BY r.id", NULL, run_row, (void *)cb, ctx);
}

static int get_run_row(sqlite3_stmt *st, void *arg)
{
	struct ffm_store_run *r = ((struct cb_arg *)arg)->ctx;

	run_of_row(st, r);
	r->job_id = NULL; /* the row buffer does not outlive the call */
	return 1;
}

int ffm_store__get_run(struct ffm_store *s, int64_t run, struct ffm_store_run *out)
{
	int err = rows_of(s, "SELECT " RUN_COLS " WHERE r.id = ?1", &run, get_run_row, NULL, out);

	return err < 0 ? err : err ? 0 : -ENOENT;
}

/* The first column of the one row of @sql (?1 bound to @param) into *out; -ENOENT: no row. */
static int one_value(struct ffm_store *s, const char *sql, int64_t param, int64_t *out)
{
	sqlite3_stmt *st;
	int rc, err = prepare(s, sql, &st);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, param);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*out = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : rc == SQLITE_DONE ? -ENOENT : ffm_store_err(s->db, rc);
}

int ffm_store__run_last_ns(struct ffm_store *s, int64_t run, uint64_t *out)
{
	/* The newest events by the primary key's order: the last to end is among them (a call
	 * that started earlier and ended later than all 256 would be a 256-deep overlap). */
	return one_value(s,
			 "SELECT max(coalesce((SELECT max(e) FROM (SELECT start_ns + dur_ns AS e FROM events"
			 "   WHERE run = ?1 ORDER BY start_ns DESC LIMIT 256)), 0),"
			 " coalesce((SELECT max(max(start_ns, end_ns)) FROM processes WHERE run = ?1), 0))",
			 run, (int64_t *)out);
}

int ffm_store__run_procs_span(struct ffm_store *s, int64_t run, uint64_t end_ns, uint64_t *lo,
			      uint64_t *hi)
{
	sqlite3_stmt *st;
	/* A row without an exit whose tgid has a later row was an image that exec replaced
	 * (sh, then env, then the program): it ended where the next began. */
	int rc, err = prepare(s, "SELECT coalesce(min(nullif(start_ns, 0)), 0),"
			      " coalesce(max(CASE WHEN end_ns != 0 THEN end_ns ELSE coalesce("
			      "  (SELECT min(q.start_ns) FROM processes q WHERE q.run = ?1"
			      "   AND q.tgid = p.tgid AND q.id > p.id), ?2) END), 0)"
			      " FROM processes p WHERE run = ?1", &st);

	*lo = *hi = 0;
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, (int64_t)end_ns);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW) {
		*lo = (uint64_t)sqlite3_column_int64(st, 0);
		*hi = (uint64_t)sqlite3_column_int64(st, 1);
	}
	sqlite3_finalize(st);
	return rc == SQLITE_ROW ? 0 : ffm_store_err(s->db, rc);
}

static int history_row(sqlite3_stmt *st, void *arg)
{
	struct ffm_store_stage_history *out = ((struct cb_arg *)arg)->ctx;
	int64_t stage = col(st, 0);

	if (stage < 1 || stage > FFM_STORE_MAX_STAGE)
		return 0;
	if (!col(st, 1)) {
		out->open_runs += col(st, 2);
		return 0;
	}
	out->runs[stage] = col(st, 2);
	out->partial[stage] = col(st, 3);
	out->last_run[stage] = col(st, 4);
	out->interrupted[stage] = col(st, 5);
	return 0;
}

_Static_assert(FFM_RUN_RETRACE == 16, "the stage history's query names the flag by its value");
int ffm_store__stage_history(struct ffm_store *s, struct ffm_store_stage_history *out)
{
	memset(out, 0, sizeof(*out));
	return rows_of(s,
		       "SELECT stage, end_ns != 0, count(*), sum(flags & 1 != 0), max(id),"
		       " sum(flags & 9 = 9) FROM runs"
		       /* a re-trace (FFM_RUN_RETRACE, 16) makes earlier stage-3/4 runs history */
		       " WHERE stage NOT IN (3, 4) OR id > (SELECT coalesce(max(id), 0) FROM runs"
		       "  WHERE flags & 16 AND end_ns != 0)"
		       " GROUP BY stage, end_ns != 0",
		       NULL, history_row, NULL, out);
}

/* The share (parts per million) of @run's wait time spent at call sites (stacks) where no
 * earlier run of the key waited. */
int ffm_store__new_wait_share(struct ffm_store *s, int64_t run, int64_t *ppm)
{
	return one_value(s,
			 "SELECT coalesce(sum(CASE WHEN NOT EXISTS (SELECT 1 FROM stack_stats b"
			 "   WHERE b.run < ?1 AND b.kind = 1 AND b.stack = a.stack) THEN a.wait_ns END)"
			 "  * 1000000 / max(sum(a.wait_ns), 1), 0)"
			 " FROM stack_stats a WHERE a.run = ?1 AND a.kind = 1",
			 run, ppm);
}

int ffm_store__dup_transfers(struct ffm_store *s, int64_t run, int64_t *any)
{
	/* dup 1: FFM_DUP_SAME_DST */
	return one_value(s, "SELECT EXISTS (SELECT 1 FROM xfer_hashes WHERE run = ?1 AND dup = 1)",
			 run, any);
}

/* ---- events ----------------------------------------------------------------------------- */

/* start_ns is stored as signed: times from a boot clock stay far below 2^63. The primary key
 * (run, start_ns, id) gives the order without a sort. The analysis reads every event of a run:
 * the timing query has only the columns it needs (SQLite's per-column cost is most of the scan's),
 * the full one the same first and the rest after. */
#define TIMING_COLS(probe) "SELECT start_ns, id, dur_ns, wait_ns, info, pid, stack, stream, " probe
#define OF_RUN " FROM events WHERE run = ?1 AND start_ns BETWEEN ?2 AND ?3 ORDER BY start_ns, id"
#define REST_COLS ", bytes, src, dst, flags"
#define OF_KINDS " FROM events WHERE run = ?1 AND ((1 << (info & 255)) & ?2) != 0"            \
		 " ORDER BY start_ns, id"
/* [timing][probe_ns column: schema v8 on; a reader of an older file reads 0] */
static const char *const events_sql[2][2] = {
	{ TIMING_COLS("0") REST_COLS OF_RUN, TIMING_COLS("probe_ns") REST_COLS OF_RUN },
	{ TIMING_COLS("0") OF_RUN, TIMING_COLS("probe_ns") OF_RUN },
};

static void timing_of_row(sqlite3_stmt *st, int64_t run, struct ffm_store_event *ev)
{
	uint64_t info = (uint64_t)sqlite3_column_int64(st, 4);
	uint64_t pid = (uint64_t)sqlite3_column_int64(st, 5);

	*ev = (struct ffm_store_event){
		.run = run,
		.start_ns = (uint64_t)sqlite3_column_int64(st, 0),
		.id = sqlite3_column_int64(st, 1),
		.dur_ns = (uint64_t)sqlite3_column_int64(st, 2),
		.wait_ns = (uint64_t)sqlite3_column_int64(st, 3),
		.kind = (uint32_t)(info & 255),
		.dir = (uint32_t)(info >> 8 & 255),
		.api = (uint32_t)(info >> 16),
		.tgid = (uint32_t)(pid >> 32),
		.tid = (uint32_t)pid,
		.stack = sqlite3_column_int64(st, 6),
		.stream = (uint64_t)sqlite3_column_int64(st, 7),
		.probe_ns = (uint64_t)sqlite3_column_int64(st, 8),
	};
}

static void event_of_row(sqlite3_stmt *st, int64_t run, struct ffm_store_event *ev)
{
	timing_of_row(st, run, ev);
	ev->bytes = (uint64_t)sqlite3_column_int64(st, 9);
	ev->src = (uint64_t)sqlite3_column_int64(st, 10);
	ev->dst = (uint64_t)sqlite3_column_int64(st, 11);
	ev->flags = (uint32_t)sqlite3_column_int64(st, 12);
}

static int cursor_new(struct ffm_store *s, int64_t run, uint64_t from_ns, uint64_t to_ns,
		      bool timing, struct ffm_store_cursor **ret);

int ffm_store_cursor__new(struct ffm_store *s, int64_t run, uint64_t from_ns, uint64_t to_ns,
			  struct ffm_store_cursor **ret)
{
	return cursor_new(s, run, from_ns, to_ns, false, ret);
}

int ffm_store_cursor__new_timing(struct ffm_store *s, int64_t run, uint64_t from_ns,
				 uint64_t to_ns, struct ffm_store_cursor **ret)
{
	return cursor_new(s, run, from_ns, to_ns, true, ret);
}

static int cursor_new(struct ffm_store *s, int64_t run, uint64_t from_ns, uint64_t to_ns,
		      bool timing, struct ffm_store_cursor **ret)
{
	struct ffm_store_cursor *c;
	int err;

	if (s->in_txn) {
		err = ffm_store_drain(s);
		if (err)
			return err;
	}
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->s = s;
	c->run = run;
	c->timing = timing;
	err = prepare(s, events_sql[timing][s->version >= 8], &c->st);
	if (err) {
		free(c);
		return err;
	}
	sqlite3_bind_int64(c->st, 1, run);
	sqlite3_bind_int64(c->st, 2, i64(from_ns));
	sqlite3_bind_int64(c->st, 3, to_ns ? i64(to_ns) : INT64_MAX);
	*ret = c;
	return 0;
}

int ffm_store_cursor__next(struct ffm_store_cursor *c, struct ffm_store_event *ev)
{
	int rc;

	if (!c->st)
		return 0;
	rc = sqlite3_step(c->st);
	if (rc == SQLITE_ROW) {
		if (c->timing)
			timing_of_row(c->st, c->run, ev);
		else
			event_of_row(c->st, c->run, ev);
		return 1;
	}
	/* end or error: release the read snapshot at once */
	sqlite3_finalize(c->st);
	c->st = NULL;
	return rc == SQLITE_DONE ? 0 : ffm_store_err(c->s->db, rc);
}

struct ffm_store_cursor *ffm_store_cursor__free(struct ffm_store_cursor *c)
{
	if (!c)
		return NULL;
	sqlite3_finalize(c->st);
	free(c);
	return NULL;
}

int ffm_store__for_each_event(struct ffm_store *s, int64_t run, ffm_store_event_cb cb, void *ctx)
{
	struct ffm_store_cursor *c;
	struct ffm_store_event ev;
	int r;

	r = ffm_store_cursor__new(s, run, 0, 0, &c);
	if (r)
		return r;
	while ((r = ffm_store_cursor__next(c, &ev)) == 1) {
		r = cb(&ev, ctx);
		if (r)
			break;
	}
	ffm_store_cursor__free(c);
	return r;
}

static int event_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_event ev;

	event_of_row(st, sqlite3_column_int64(st, 13), &ev);
	return ((ffm_store_event_cb)a->cb)(&ev, a->ctx);
}

int ffm_store__for_each_event_of(struct ffm_store *s, int64_t run, uint32_t kinds,
				 ffm_store_event_cb cb, void *ctx)
{
	struct cb_arg a = { (void *)cb, ctx, s };
	sqlite3_stmt *st;
	int err;

	if (!kinds || !cb)
		return -EINVAL;
	if (s->in_txn) {
		err = ffm_store_drain(s);
		if (err)
			return err;
	}
	err = prepare(s, s->version >= 8 ?
		      TIMING_COLS("probe_ns") REST_COLS ", run" OF_KINDS :
		      TIMING_COLS("0") REST_COLS ", run" OF_KINDS, &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, kinds);
	return each_row(s, st, event_row, &a);
}

static int agg_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_stack_agg g = {
		.stack = col(st, 0), .kind = col(st, 1), .api = col(st, 2), .count = col(st, 3),
		.dur_ns = col(st, 4), .wait_ns = col(st, 5), .bytes = col(st, 6),
	};

	return ((ffm_store_agg_cb)a->cb)(&g, a->ctx);
}

int ffm_store__for_each_stack_agg(struct ffm_store *s, int64_t run, ffm_store_agg_cb cb,
				  void *ctx)
{
	return rows_of(s,
		       "SELECT stack, kind, api, count, dur_ns, wait_ns, bytes FROM stack_stats"
		       " WHERE run = ?1 AND (kind = 1 OR (SELECT stage FROM runs WHERE id = ?1) != 1)"
		       " ORDER BY wait_ns DESC, dur_ns DESC, stack, kind, api",
		       &run, agg_row, (void *)cb, ctx);
}

/* ---- CPU samples of Python threads (stage 2) ---------------------------------------------- */

static int cpu_samples_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_cpu_samples x = {
		.stack = col(st, 0), .state = (uint32_t)col(st, 1), .n = (uint64_t)col(st, 2),
		.ns = (uint64_t)col(st, 3),
	};

	return ((ffm_store_cpu_samples_cb)a->cb)(&x, a->ctx);
}

int ffm_store__for_each_cpu_samples(struct ffm_store *s, int64_t run, ffm_store_cpu_samples_cb cb,
				    void *ctx)
{
	return rows_of(s, "SELECT stack, state, n, ns FROM cpu_samples WHERE run = ?1"
			  " ORDER BY stack, state",
		       &run, cpu_samples_row, (void *)cb, ctx);
}

/* ---- adaptive stage 1's samples -------------------------------------------------------- */

static int sample_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_sample x = {
		.tgid = (uint32_t)col(st, 0), .kind = (uint32_t)col(st, 1), .start_ns = (uint64_t)col(st, 2),
		.end_ns = (uint64_t)col(st, 3), .on_ns = (uint64_t)col(st, 4),
	};

	return ((ffm_store_sample_cb)a->cb)(&x, a->ctx);
}

int ffm_store__for_each_sample(struct ffm_store *s, int64_t run, ffm_store_sample_cb cb, void *ctx)
{
	return rows_of(s,
		       "SELECT tgid, kind, start_ns, end_ns, on_ns FROM sample_spans WHERE run = ?1"
		       " ORDER BY tgid, kind, start_ns",
		       &run, sample_row, (void *)cb, ctx);
}

static int sample_agg_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_sample_agg g = {
		.tgid = (uint32_t)col(st, 0), .kind = (uint32_t)col(st, 1), .start_ns = (uint64_t)col(st, 2),
		.stack = col(st, 3), .count = (uint64_t)col(st, 4), .wait_ns = (uint64_t)col(st, 5),
	};

	return ((ffm_store_sample_agg_cb)a->cb)(&g, a->ctx);
}

/* The waits by start time: a wait belongs to the span or window it began in. */
_Static_assert(FFM_EV_WAIT == 1, "the query below names the wait kind by its value");
int ffm_store__for_each_sample_agg(struct ffm_store *s, int64_t run, ffm_store_sample_agg_cb cb,
				   void *ctx)
{
	return rows_of(s,
		       "SELECT p.tgid, p.kind, p.start_ns, e.stack, count(*), sum(e.wait_ns)"
		       " FROM sample_spans p JOIN events e ON e.run = p.run"
		       "  AND e.start_ns >= p.start_ns AND e.start_ns < p.end_ns"
		       "  AND (e.pid >> 32) = p.tgid AND (e.info & 255) = 1"
		       " WHERE p.run = ?1 GROUP BY p.tgid, p.kind, p.start_ns, e.stack",
		       &run, sample_agg_row, (void *)cb, ctx);
}

/* ---- stacks, names, drops --------------------------------------------------------------- */

#define FRAME_COLS \
	"f.id, f.build_id, f.offset, f.module, f.func, f.demangled, f.folded, f.file, f.line, f.inlined"

static int frame_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	const char *bid = col_text(st, 2);
	struct ffm_store_frame f = {
		.id = col(st, 1), .build_id = bid && strncmp(bid, "path:", 5) ? bid : NULL,
		.offset = col(st, 3), .module = col_text(st, 4), .func = col_text(st, 5),
		.demangled = col_text(st, 6), .folded = col_text(st, 7), .file = col_text(st, 8),
		.line = col(st, 9), .inlined = col(st, 10),
	};

	return ((ffm_store_frame_cb)a->cb)(&f, (uint32_t)sqlite3_column_int64(st, 0), a->ctx);
}

int ffm_store__for_each_frame(struct ffm_store *s, int64_t stack, ffm_store_frame_cb cb, void *ctx)
{
	int64_t n;
	int err = one_value(s, "SELECT nframes FROM stacks WHERE id = ?1", stack, &n);

	if (err)
		return err;
	err = rows_of(s,
		      "SELECT sf.depth, " FRAME_COLS " FROM stack_frames sf JOIN frames f ON f.id = sf.frame"
		      " WHERE sf.stack = ?1 ORDER BY sf.depth",
		      &stack, frame_row, (void *)cb, ctx);
	return err ? err : (int)n;
}

static int api_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;

	return ((ffm_store_api_cb)a->cb)((uint32_t)sqlite3_column_int64(st, 0), col_text(st, 1),
					 a->ctx);
}

int ffm_store__for_each_api_name(struct ffm_store *s, ffm_store_api_cb cb, void *ctx)
{
	return rows_of(s, "SELECT id, name FROM api_names ORDER BY id", NULL, api_row, (void *)cb, ctx);
}

static int drops_row(sqlite3_stmt *st, void *arg)
{
	struct ffm_store_drops *out = ((struct cb_arg *)arg)->ctx;
	int64_t r = col(st, 0);

	if (r >= 0 && r < FFM_DROP__MAX)
		out->count[r] += col(st, 1);
	return 0;
}

int ffm_store__get_drops(struct ffm_store *s, int64_t run, struct ffm_store_drops *out)
{
	memset(out, 0, sizeof(*out));
	return rows_of(s, "SELECT reason, count FROM drops WHERE run = ?1", &run, drops_row, NULL,
		       out);
}

static int overhead_row(sqlite3_stmt *st, void *arg)
{
	struct ffm_overhead *out = ((struct cb_arg *)arg)->ctx;
	int64_t part = col(st, 0);

	if (part >= 0 && part < FFM_OVERHEAD_N) {
		out->ns[part] = (uint64_t)col(st, 1);
		out->n[part] = (uint64_t)col(st, 2);
	}
	return 0;
}

int ffm_store__get_overhead(struct ffm_store *s, int64_t run, struct ffm_overhead *out)
{
	memset(out, 0, sizeof(*out));
	return rows_of(s, "SELECT part, ns, count FROM run_overhead WHERE run = ?1", &run, overhead_row,
		       NULL, out);
}

/* ---- stage 3 and 4 results -------------------------------------------------------------- */

static int xfer_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_xfer_hash h = {
		.id = col(st, 0), .run = col(st, 1), .event = col(st, 2), .stack = col(st, 3),
		.hash = col(st, 4), .dst = col(st, 5), .bytes = col(st, 6),
		.first_event = col(st, 7), .first_stack = col(st, 8), .dup = col(st, 9),
	};

	return ((ffm_store_xfer_cb)a->cb)(&h, a->ctx);
}

#define XFER_SQL                                                                                   \
	"SELECT id, run, event, stack, hash, dst, bytes, first_event, first_stack, dup"             \
	" FROM xfer_hashes WHERE run = ?1 ORDER BY "

int ffm_store__for_each_xfer_hash(struct ffm_store *s, int64_t run, ffm_store_xfer_cb cb,
				  void *ctx)
{
	return rows_of(s, XFER_SQL "id", &run, xfer_row, (void *)cb, ctx);
}

/* (run, stack) index order: no sort, whatever the number of rows. */
int ffm_store__for_each_xfer_hash_by_stack(struct ffm_store *s, int64_t run, ffm_store_xfer_cb cb,
					   void *ctx)
{
	return rows_of(s, XFER_SQL "stack, id", &run, xfer_row, (void *)cb, ctx);
}

static int sync_use_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_sync_use u = {
		.id = col(st, 0), .run = col(st, 1), .event = col(st, 2), .stack = col(st, 3),
		.prot_lo = col(st, 4), .prot_hi = col(st, 5), .use_addr = col(st, 6),
		.use_stack = col(st, 7), .use_frame = col(st, 8), .use_delay_ns = col(st, 9),
		.flags = col(st, 10), .watched_bytes = col(st, 11), .covered_bytes = col(st, 12),
	};

	return ((ffm_store_sync_use_cb)a->cb)(&u, a->ctx);
}

#define SYNC_USE_SQL                                                                               \
	"SELECT id, run, event, stack, prot_lo, prot_hi, use_addr, use_stack, use_frame,"          \
	" use_delay_ns, flags, watched_bytes, covered_bytes FROM sync_uses WHERE run = ?1 ORDER BY "

int ffm_store__for_each_sync_use(struct ffm_store *s, int64_t run, ffm_store_sync_use_cb cb,
				 void *ctx)
{
	return rows_of(s, SYNC_USE_SQL "id", &run, sync_use_row, (void *)cb, ctx);
}

int ffm_store__for_each_sync_use_by_stack(struct ffm_store *s, int64_t run,
					  ffm_store_sync_use_cb cb, void *ctx)
{
	return rows_of(s, SYNC_USE_SQL "stack, id", &run, sync_use_row, (void *)cb, ctx);
}

/* ---- processes, single frames ----------------------------------------------------------- */

static int process_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;
	struct ffm_store_process p = {
		.run = col(st, 0), .tgid = col(st, 1), .ptgid = col(st, 2), .exe = col_text(st, 3),
		.start_ns = col(st, 4), .end_ns = col(st, 5), .exit_code = col(st, 6),
	};

	return ((ffm_store_process_cb)a->cb)(&p, a->ctx);
}

int ffm_store__for_each_process(struct ffm_store *s, int64_t run, ffm_store_process_cb cb,
				void *ctx)
{
	return rows_of(s,
		       "SELECT run, tgid, ptgid, exe, start_ns, end_ns, exit_code FROM processes"
		       " WHERE run = ?1 ORDER BY start_ns, id",
		       &run, process_row, (void *)cb, ctx);
}

static int kernel_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;

	return ((ffm_store_kernel_cb)a->cb)((uint32_t)col(st, 0), (uint64_t)col(st, 1),
					    col_text(st, 2), a->ctx);
}

int ffm_store__for_each_kernel(struct ffm_store *s, int64_t run, ffm_store_kernel_cb cb,
			       void *ctx)
{
	return rows_of(s, "SELECT tgid, handle, name FROM kernels WHERE run = ?1", &run,
		       kernel_row, (void *)cb, ctx);
}

static int site_kernel_row(sqlite3_stmt *st, void *arg)
{
	struct cb_arg *a = arg;

	return ((ffm_store_site_kernel_cb)a->cb)(col(st, 0), col_text(st, 1), (uint64_t)col(st, 2),
						 a->ctx);
}

_Static_assert(FFM_EV_LAUNCH == 7, "the site kernels' query names the kind by its value");
int ffm_store__for_each_site_kernel(struct ffm_store *s, int64_t run, ffm_store_site_kernel_cb cb,
				    void *ctx)
{
	int64_t any = 0;

	/* A run without names costs one lookup, not a scan of its events. */
	if (one_value(s, "SELECT count(*) FROM (SELECT 1 FROM kernels WHERE run = ?1 LIMIT 1)", run,
		      &any) < 0 || !any)
		return 0;
	return rows_of(s, "SELECT e.stack, k.name, count(*) AS n FROM events e JOIN kernels k"
		       " ON k.run = e.run AND k.tgid = e.pid >> 32 AND k.handle = e.src"
		       " WHERE e.run = ?1 AND (e.info & 255) = 7 GROUP BY e.stack, k.name"
		       " ORDER BY e.stack, n DESC", &run, site_kernel_row, (void *)cb, ctx);
}

struct one_frame {
	ffm_store_frame_cb cb;
	void *ctx;
	bool seen;
};

static int on_one_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct one_frame *o = ctx;

	o->seen = true;
	return o->cb(f, depth, o->ctx);
}

int ffm_store__get_frame(struct ffm_store *s, int64_t frame, ffm_store_frame_cb cb, void *ctx)
{
	struct one_frame o = { cb, ctx };
	int err = rows_of(s, "SELECT 0, " FRAME_COLS " FROM frames f WHERE f.id = ?1", &frame,
			  frame_row, (void *)on_one_frame, &o);

	return err ? err : o.seen ? 0 : -ENOENT;
}

int ffm_store__for_each_wait_api(struct ffm_store *s, int64_t run, ffm_store_api_cb cb, void *ctx)
{
	/* kind 1: FFM_EV_WAIT */
	return rows_of(s,
		       "SELECT id, name FROM api_names WHERE id IN (SELECT api FROM stack_stats"
		       " WHERE run = ?1 AND kind = 1 AND api != 0) ORDER BY id",
		       &run, api_row, (void *)cb, ctx);
}

struct ids {
	int64_t *v;
	size_t n, cap;
};

static int id_row(sqlite3_stmt *st, void *arg)
{
	struct ids *ids = ((struct cb_arg *)arg)->ctx;

	if (FFM_GROW(ids->v, ids->cap, ids->n + 1))
		return -ENOMEM;
	ids->v[ids->n++] = sqlite3_column_int64(st, 0);
	return 0;
}

int ffm_store__used_dst_stacks(struct ffm_store *s, int64_t run, int64_t **stacks, size_t *n)
{
	struct ids ids = {};
	/* info is kind | dir << 8 | api << 16: FFM_EV_ALLOC (4), or FFM_EV_TRANSFER (3) with
	 * FFM_DIR_DTOH (2) */
	int err = rows_of(s,
			  "SELECT DISTINCT stack FROM events WHERE run = ?1 AND stack != 0 AND"
			  " ((info & 255) = 4 OR (info & 65535) = (2 << 8 | 3)) AND dst IN"
			  " (SELECT prot_lo FROM sync_uses WHERE run = ?1 AND use_addr != 0 AND prot_lo != 0)",
			  &run, id_row, NULL, &ids);

	if (err) {
		free(ids.v);
		return err;
	}
	*stacks = ids.v;
	*n = ids.n;
	return 0;
}

int ffm_store__counts_differ(struct ffm_store *s, int64_t run, int64_t ref, uint32_t kinds,
			     uint64_t min, double share)
{
	sqlite3_stmt *st;
	int rc, err = prepare(s,
			      "SELECT EXISTS (SELECT 1 FROM (SELECT"
			      "  sum(CASE WHEN run = ?1 THEN count ELSE 0 END) AS a,"
			      "  sum(CASE WHEN run = ?2 THEN count ELSE 0 END) AS b FROM stack_stats"
			      "  WHERE run IN (?1, ?2) AND (?3 >> kind) & 1 GROUP BY stack, kind)"
			      " WHERE abs(a - b) >= ?4 AND abs(a - b) > ?5 * max(a, b))",
			      &st);

	if (err)
		return err;
	BIND_I64(st, 1, run, ref, kinds, min);
	sqlite3_bind_double(st, 5, share);
	rc = sqlite3_step(st);
	err = rc == SQLITE_ROW ? sqlite3_column_int(st, 0) : ffm_store_err(s->db, rc);
	sqlite3_finalize(st);
	return err;
}
