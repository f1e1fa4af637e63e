/* SPDX-License-Identifier: MIT */
/*
 * The stored results of an analysis (schema v3: analyses, analysis_sites, analysis_problems,
 * analysis_benefits): one job's latest analysis, written in one transaction that first deletes
 * the job's previous one, so SQL never sees a half-written or a stale second set.
 */
#include <errno.h>

#include "store/store_int.h"

static int prep(struct ffm_store *s, const char *sql, sqlite3_stmt **st)
{
	int rc = sqlite3_prepare_v2(s->db, sql, -1, st, NULL);

	return rc == SQLITE_OK ? 0 : ffm_store_err(s->db, rc);
}

/* Step @st once (bound by the caller), then reset it for the next row. */
static int step_row(struct ffm_store *s, sqlite3_stmt *st)
{
	int rc = sqlite3_step(st);

	sqlite3_reset(st);
	return rc == SQLITE_DONE ? 0 : ffm_store_err(s->db, rc);
}

static void bind_counts(sqlite3_stmt *st, int first, const struct ffm_store_problem_counts *n)
{
	BIND_I64(st, first, i64(n->unnecessary), i64(n->misplaced), i64(n->duplicate),
		 i64(n->host_read), i64(n->launch_blocked));
}

static int put_head(struct ffm_store *s, const struct ffm_store_analysis *h, int64_t *id)
{
	sqlite3_stmt *st = NULL;
	int err;

	err = prep(s, "INSERT INTO analyses(job_id, at_unix, tool_version, grouping, run_baseline,"
		   " run_timeline, run_verdicts, run_first_use, have_problems, wall_ns, wait_ns,"
		   " recoverable_ns, recoverable_share, events, records_lost, incomplete_runs,"
		   " divergent_sites) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13,"
		   " ?14, ?15, ?16, ?17)", &st);
	if (err)
		return err;
	bind_text(st, 1, h->job_id);
	sqlite3_bind_int64(st, 2, h->at_unix);
	bind_text(st, 3, h->tool_version ? h->tool_version : "unknown");
	bind_text(st, 4, h->grouping ? h->grouping : "point");
	BIND_I64(st, 5, h->run_baseline, h->run_timeline, h->run_verdicts, h->run_first_use,
		 h->have_problems, i64(h->wall_ns), i64(h->wait_ns), i64(h->recoverable_ns));
	sqlite3_bind_double(st, 13, h->recoverable_share);
	BIND_I64(st, 14, i64(h->events), i64(h->records_lost), h->incomplete_runs,
		 h->divergent_sites);
	err = step_row(s, st);
	sqlite3_finalize(st);
	*id = sqlite3_last_insert_rowid(s->db);
	return err;
}

static int put_sites(struct ffm_store *s, int64_t id, const struct ffm_store_results *r)
{
	sqlite3_stmt *st = NULL;
	int err;

	err = prep(s, "INSERT INTO analysis_sites VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10,"
		   " ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22)", &st);
	for (size_t i = 0; !err && i < r->n_sites; i++) {
		const struct ffm_store_site_result *x = &r->sites[i];

		BIND_I64(st, 1, id, x->stack, x->api, x->kind);
		bind_text(st, 5, x->function ? x->function : "?");
		bind_text(st, 6, x->file ? x->file : "?");
		BIND_I64(st, 7, x->line);
		bind_text(st, 8, x->driver_function ? x->driver_function : "");
		BIND_I64(st, 9, i64(x->count), i64(x->dur_ns), i64(x->wait_ns), i64(x->bytes),
			 x->problem);
		bind_counts(st, 14, &x->n);
		BIND_I64(st, 19, i64(x->n_classified), i64(x->benefit_ns), x->use_delay_ns,
			 x->divergent);
		err = step_row(s, st);
	}
	sqlite3_finalize(st);
	return err;
}

static int put_problems(struct ffm_store *s, int64_t id, const struct ffm_store_results *r)
{
	sqlite3_stmt *st = NULL;
	int err;

	err = prep(s, "INSERT INTO analysis_problems VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9,"
		   " ?10, ?11, ?12, ?13, ?14)", &st);
	for (size_t i = 0; !err && i < r->n_problems; i++) {
		const struct ffm_store_problem_result *p = &r->problems[i];

		BIND_I64(st, 1, id, (int64_t)i + 1, p->problem, p->stack, i64(p->count));
		bind_counts(st, 6, &p->n);
		BIND_I64(st, 11, i64(p->wait_ns), i64(p->benefit_ns), p->partial, p->divergent);
		err = step_row(s, st);
	}
	sqlite3_finalize(st);
	return err;
}

static int put_benefits(struct ffm_store *s, int64_t id, const struct ffm_store_results *r)
{
	sqlite3_stmt *st = NULL;
	int err;

	err = prep(s, "INSERT INTO analysis_benefits VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)", &st);
	for (size_t i = 0; !err && i < r->n_benefits; i++) {
		const struct ffm_store_benefit_result *b = &r->benefits[i];

		BIND_I64(st, 1, id, b->api);
		bind_text(st, 3, b->function ? b->function : "");
		BIND_I64(st, 4, i64(b->calls), i64(b->dur_ns), i64(b->wait_ns), i64(b->problems),
			 i64(b->benefit_ns));
		err = step_row(s, st);
	}
	sqlite3_finalize(st);
	return err;
}

/* The job's previous results, all four tables. */
static int drop_previous(struct ffm_store *s, const char *job_id)
{
	static const char *const sql[] = {
		"DELETE FROM analysis_sites WHERE analysis IN"
		" (SELECT id FROM analyses WHERE job_id = ?1)",
		"DELETE FROM analysis_problems WHERE analysis IN"
		" (SELECT id FROM analyses WHERE job_id = ?1)",
		"DELETE FROM analysis_benefits WHERE analysis IN"
		" (SELECT id FROM analyses WHERE job_id = ?1)",
		"DELETE FROM analyses WHERE job_id = ?1",
	};
	sqlite3_stmt *st = NULL;
	int err = 0;

	for (size_t i = 0; !err && i < sizeof(sql) / sizeof(sql[0]); i++) {
		err = prep(s, sql[i], &st);
		if (err)
			break;
		bind_text(st, 1, job_id);
		err = step_row(s, st);
		sqlite3_finalize(st);
	}
	return err;
}

int ffm_store__put_results(struct ffm_store *s, const struct ffm_store_results *r, int64_t *ret_id)
{
	int64_t id = 0;
	int err;

	if (!r || !r->a.job_id || !*r->a.job_id)
		return -EINVAL;
	if (s->opts.read_only)
		return -EROFS;
	err = ffm_store__flush(s);
	if (!err)
		err = ffm_store_exec(s, "BEGIN IMMEDIATE");
	if (err)
		return err;
	err = drop_previous(s, r->a.job_id);
	if (!err)
		err = put_head(s, &r->a, &id);
	if (!err)
		err = put_sites(s, id, r);
	if (!err)
		err = put_problems(s, id, r);
	if (!err)
		err = put_benefits(s, id, r);
	if (!err)
		err = ffm_store_exec(s, "COMMIT");
	if (err) {
		ffm_store_exec(s, "ROLLBACK");
		return err;
	}
	if (ret_id)
		*ret_id = id;
	return 0;
}
