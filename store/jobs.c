/* SPDX-License-Identifier: MIT */
/*
 * The job bookkeeping of a store: jobs, runs, drivers and API names, each written at once in a
 * transaction of its own (after the open batch of ingest.c), so readers see a run begin and end
 * when it does.
 */
#include <errno.h>

#include "store/store_int.h"

/* ---- immediate writes: commit the open batch, then this row, at once --------------------- */

/* Prepare sql, let bind() fill it, step it in its own transaction (after the batch). */
static int write_now(struct ffm_store *s, const char *sql, void (*bind)(sqlite3_stmt *, const void *),
		     const void *arg, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int rc, err;

	if (s->opts.read_only)
		return -EROFS;
	err = ffm_store__flush(s);
	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, sql, -1, &st, NULL);
	if (rc != SQLITE_OK)
		return ffm_store_err(s->db, rc);
	bind(st, arg);
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW && ret_id)
		*ret_id = sqlite3_column_int64(st, 0);
	else if (rc == SQLITE_DONE && ret_id)
		*ret_id = sqlite3_last_insert_rowid(s->db);
	if (rc == SQLITE_ROW)
		rc = sqlite3_step(st);
	err = rc == SQLITE_DONE ? 0 : ffm_store_err(s->db, rc);
	if (!err && !sqlite3_changes(s->db))
		err = -ENOENT;
	sqlite3_finalize(st);
	return err;
}

static void bind_job(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_job *j = arg;

	bind_text(st, 1, j->job_id);
	sqlite3_bind_int64(st, 2, j->uid);
	sqlite3_bind_int64(st, 3, j->state ? j->state : FFM_JOB_RUNNING);
	sqlite3_bind_int64(st, 4, j->start_unix);
	sqlite3_bind_int64(st, 5, j->end_unix);
	bind_text(st, 6, j->node);
}

int ffm_store__job_begin(struct ffm_store *s, const struct ffm_store_job *job, int64_t *ret_id)
{
	if (!job || !job->job_id || !*job->job_id)
		return -EINVAL;
	return write_now(s,
			 "INSERT INTO jobs(job_id, uid, state, start_unix, end_unix, node)"
			 " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(job_id) DO UPDATE SET"
			 " uid = excluded.uid, state = excluded.state,"
			 " node = coalesce(excluded.node, node) RETURNING id",
			 bind_job, job, ret_id);
}

struct job_end_arg {
	const char *job_id;
	int32_t state;
	int64_t end_unix;
};

static void bind_job_end(sqlite3_stmt *st, const void *arg)
{
	const struct job_end_arg *a = arg;

	bind_text(st, 1, a->job_id);
	sqlite3_bind_int64(st, 2, a->state);
	sqlite3_bind_int64(st, 3, a->end_unix);
}

int ffm_store__job_end(struct ffm_store *s, const char *job_id, int32_t state, int64_t end_unix)
{
	struct job_end_arg a = { job_id, state, end_unix };

	if (!job_id)
		return -EINVAL;
	return write_now(s, "UPDATE jobs SET state = ?2, end_unix = ?3 WHERE job_id = ?1",
			 bind_job_end, &a, NULL);
}

static void bind_driver(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_driver *d = arg;

	bind_text(st, 1, d->build_id);
	bind_text(st, 2, d->path);
	sqlite3_bind_int64(st, 3, i64(d->wait_off));
	sqlite3_bind_int64(st, 4, i64(d->wait_size));
}

int ffm_store__put_driver(struct ffm_store *s, const struct ffm_store_driver *d, int64_t *ret_id)
{
	if (!d || !d->build_id || !d->path)
		return -EINVAL;
	return write_now(s,
			 "INSERT INTO drivers(build_id, path, wait_off, wait_size)"
			 " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(build_id) DO UPDATE SET"
			 " path = excluded.path, wait_off = excluded.wait_off,"
			 " wait_size = excluded.wait_size RETURNING id",
			 bind_driver, d, ret_id);
}

static void bind_run(sqlite3_stmt *st, const void *arg)
{
	const struct ffm_store_run *r = arg;

	bind_text(st, 1, r->job_id);
	sqlite3_bind_int64(st, 2, r->stage);
	sqlite3_bind_int64(st, 3, r->driver);
	sqlite3_bind_int64(st, 4, i64(r->start_ns));
	sqlite3_bind_int64(st, 5, i64(r->end_ns));
	sqlite3_bind_int64(st, 6, r->start_unix);
	sqlite3_bind_double(st, 7, r->wall_s);
	sqlite3_bind_int64(st, 8, r->exit_status);
	sqlite3_bind_int64(st, 9, r->flags);
}

int ffm_store__run_begin(struct ffm_store *s, const struct ffm_store_run *r, int64_t *ret_run)
{
	if (!r || !r->job_id || r->stage < 1 || r->stage > FFM_STORE_MAX_STAGE)
		return -EINVAL;
	/* INSERT ... SELECT inserts nothing (-ENOENT) when the job is unknown. */
	return write_now(s,
			 "INSERT INTO runs(job, stage, driver, start_ns, end_ns, start_unix, wall_s,"
			 " exit_status, flags) SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9"
			 " FROM jobs WHERE job_id = ?1 RETURNING id",
			 bind_run, r, ret_run);
}

struct run_end_arg {
	int64_t run;
	uint64_t end_ns;
	double wall_s;
	int32_t exit_status;
	uint32_t flags;
};

static void bind_run_end(sqlite3_stmt *st, const void *arg)
{
	const struct run_end_arg *a = arg;

	sqlite3_bind_int64(st, 1, a->run);
	sqlite3_bind_int64(st, 2, i64(a->end_ns));
	sqlite3_bind_double(st, 3, a->wall_s);
	sqlite3_bind_int64(st, 4, a->exit_status);
	sqlite3_bind_int64(st, 5, a->flags);
}

int ffm_store__run_end(struct ffm_store *s, int64_t run, uint64_t end_ns, double wall_s,
		       int32_t exit_status, uint32_t flags)
{
	struct run_end_arg a = { run, end_ns, wall_s, exit_status, flags };

	return write_now(s,
			 "UPDATE runs SET end_ns = ?2, wall_s = ?3, exit_status = ?4,"
			 " flags = flags | ?5 WHERE id = ?1",
			 bind_run_end, &a, NULL);
}

struct api_arg {
	uint32_t api;
	const char *name;
};

static void bind_api(sqlite3_stmt *st, const void *arg)
{
	const struct api_arg *a = arg;

	sqlite3_bind_int64(st, 1, a->api);
	bind_text(st, 2, a->name);
}

int ffm_store__put_api_name(struct ffm_store *s, uint32_t api, const char *name)
{
	struct api_arg a = { api, name };

	if (!name)
		return -EINVAL;
	return write_now(s, "INSERT OR REPLACE INTO api_names(id, name) VALUES(?1, ?2)", bind_api,
			 &a, NULL);
}
