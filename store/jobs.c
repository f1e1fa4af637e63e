/* SPDX-License-Identifier: MIT */
/*
 * The job bookkeeping of a store: jobs, runs, drivers and API names, each written at once in a
 * transaction of its own (after the open batch of ingest.c), so readers see a run begin and end
 * when it does.
 */
#include <errno.h>

#include "store/store_int.h"

/* ---- immediate writes: commit the open batch, then this row, at once --------------------- */

/* The open batch committed, then @sql prepared into *st for the caller to bind. */
static int prepare_now(struct ffm_store *s, const char *sql, sqlite3_stmt **st)
{
	int rc, err;

	if (s->opts.read_only)
		return -EROFS;
	err = ffm_store__flush(s);
	if (err)
		return err;
	rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);
	return rc == SQLITE_OK ? 0 : ffm_store_err(s->db, rc);
}

/* Step @st in its own transaction and finalize it: its RETURNING id (or rowid) in *ret_id;
 * -ENOENT when it changed no row. */
static int step_now(struct ffm_store *s, sqlite3_stmt *st, int64_t *ret_id)
{
	int rc = sqlite3_step(st), err;

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

int ffm_store__job_begin(struct ffm_store *s, const struct ffm_store_job *job, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int err;

	if (!job || !job->job_id || !*job->job_id)
		return -EINVAL;
	err = prepare_now(s, "INSERT INTO jobs(job_id, uid, state, start_unix, end_unix, node)"
			  " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(job_id) DO UPDATE SET"
			  " uid = excluded.uid, state = excluded.state,"
			  " node = coalesce(excluded.node, node) RETURNING id", &st);
	if (err)
		return err;
	bind_text(st, 1, job->job_id);
	BIND_I64(st, 2, job->uid, job->state ? job->state : FFM_JOB_RUNNING, job->start_unix,
		 job->end_unix);
	bind_text(st, 6, job->node);
	return step_now(s, st, ret_id);
}

int ffm_store__job_end(struct ffm_store *s, const char *job_id, int32_t state, int64_t end_unix)
{
	sqlite3_stmt *st;
	int err;

	if (!job_id)
		return -EINVAL;
	err = prepare_now(s, "UPDATE jobs SET state = ?2, end_unix = ?3 WHERE job_id = ?1", &st);
	if (err)
		return err;
	bind_text(st, 1, job_id);
	BIND_I64(st, 2, state, end_unix);
	return step_now(s, st, NULL);
}

int ffm_store__put_driver(struct ffm_store *s, const struct ffm_store_driver *d, int64_t *ret_id)
{
	sqlite3_stmt *st;
	int err;

	if (!d || !d->build_id || !d->path)
		return -EINVAL;
	err = prepare_now(s, "INSERT INTO drivers(build_id, path, wait_off, wait_size, node_model)"
			  " VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(build_id) DO UPDATE SET"
			  " path = excluded.path, wait_off = excluded.wait_off,"
			  " wait_size = excluded.wait_size,"
			  " node_model = coalesce(excluded.node_model, node_model) RETURNING id", &st);
	if (err)
		return err;
	bind_text(st, 1, d->build_id);
	bind_text(st, 2, d->path);
	BIND_I64(st, 3, d->wait_off, d->wait_size);
	if (d->node_model)
		bind_text(st, 5, d->node_model);
	return step_now(s, st, ret_id);
}

int ffm_store__run_begin(struct ffm_store *s, const struct ffm_store_run *r, int64_t *ret_run)
{
	sqlite3_stmt *st;
	int err;

	if (!r || !r->job_id || r->stage < 1 || r->stage > FFM_STORE_MAX_STAGE)
		return -EINVAL;
	/* INSERT ... SELECT inserts nothing (-ENOENT) when the job is unknown. */
	err = prepare_now(s, "INSERT INTO runs(job, stage, driver, start_ns, end_ns, start_unix, wall_s,"
			  " exit_status, flags) SELECT id, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9"
			  " FROM jobs WHERE job_id = ?1 RETURNING id", &st);
	if (err)
		return err;
	bind_text(st, 1, r->job_id);
	BIND_I64(st, 2, r->stage, r->driver, r->start_ns, r->end_ns, r->start_unix);
	sqlite3_bind_double(st, 7, r->wall_s);
	BIND_I64(st, 8, r->exit_status, r->flags);
	return step_now(s, st, ret_run);
}

int ffm_store__run_end(struct ffm_store *s, int64_t run, uint64_t end_ns, double wall_s,
		       int32_t exit_status, uint32_t flags)
{
	sqlite3_stmt *st;
	int err;

	err = prepare_now(s, "UPDATE runs SET end_ns = ?2, wall_s = ?3, exit_status = ?4,"
			  " flags = flags | ?5 WHERE id = ?1", &st);
	if (err)
		return err;
	BIND_I64(st, 1, run, end_ns);
	sqlite3_bind_double(st, 3, wall_s);
	BIND_I64(st, 4, exit_status, flags);
	return step_now(s, st, NULL);
}

int ffm_store__put_kernel(struct ffm_store *s, int64_t run, uint32_t tgid, uint64_t handle,
			  const char *name)
{
	sqlite3_stmt *st;
	int err = prepare_now(s, "INSERT OR REPLACE INTO kernels(run, tgid, handle, name)"
			      " VALUES(?1, ?2, ?3, ?4)", &st);

	if (err)
		return err;
	sqlite3_bind_int64(st, 1, run);
	sqlite3_bind_int64(st, 2, tgid);
	sqlite3_bind_int64(st, 3, (int64_t)handle);
	bind_text(st, 4, name);
	return step_now(s, st, NULL);
}

int ffm_store__put_api_name(struct ffm_store *s, uint32_t api, const char *name)
{
	sqlite3_stmt *st;
	int err;

	if (!name)
		return -EINVAL;
	err = prepare_now(s, "INSERT OR REPLACE INTO api_names(id, name) VALUES(?1, ?2)", &st);
	if (err)
		return err;
	sqlite3_bind_int64(st, 1, api);
	bind_text(st, 2, name);
	return step_now(s, st, NULL);
}

/* ---- the price of a run's processes (struct ffm_overhead) ---------------------------------- */

static const char *const overhead_names[FFM_OVERHEAD_N] = {
	"held", "bpf", "waits_full", "waits_sampled", "attach", "detach", "procfs", "python_check",
	"symbols", "driver",
};

const char *ffm_overhead_part_name(int part)
{
	return part >= 0 && part < FFM_OVERHEAD_N ? overhead_names[part] : NULL;
}

int ffm_store__put_overhead(struct ffm_store *s, int64_t run, const struct ffm_overhead *p)
{
	int err = 0;

	for (int i = 0; i < FFM_OVERHEAD_N && !err; i++) {
		sqlite3_stmt *st;

		err = prepare_now(s, "INSERT OR REPLACE INTO run_overhead(run, part, ns, count)"
				  " VALUES(?1, ?2, ?3, ?4)", &st);
		if (err)
			break;
		BIND_I64(st, 1, run, i, p->ns[i], p->n[i]);
		err = step_now(s, st, NULL);
	}
	return err;
}
