/* SPDX-License-Identifier: MIT */
/*
 * ffmctl status [--json]   what ffmd is doing now: the libcuda files it knows (path, build-id,
 *                          wait-function offset, probes attached) and the active jobs (processes,
 *                          stage, events/s, drops). Asks ffmd; a user sees only their own jobs.
 * ffmctl jobs [--json]     every job recorded under the state directory, read from the stores
 *                          (no daemon needed): id, key, user, runs, stages done, state, and
 *                          its command (the program its first run's first process ran, else
 *                          the key's); newest last.
 *
 * status --json prints ffmd's answer as it came; the text form is rendered from it.
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/client.h"
#include "cli/ffmctl.h"
#include "cli/report.h"
#include "stages/ffm_plan.h"
#include "store/ffm_store.h"
#include "common/ffm_json.h"
#include "common/util.h"

static const char *user_name(uint32_t uid, char *buf, size_t len)
{
	struct passwd *pw = getpwuid(uid);

	if (pw)
		snprintf(buf, len, "%s", pw->pw_name);
	else
		snprintf(buf, len, "%u", uid);
	return buf;
}

/* A column as wide as the longest of its values (@len), at least @min (its heading's room),
 * at most 64 (a longer value runs into the next column rather than push every row). */
static int col_width(int w, size_t len)
{
	return len > (size_t)w ? (len < 64 ? (int)len : 64) : w;
}

/* ---- status ------------------------------------------------------------------------------- */

static void print_drivers(const json_t *drivers)
{
	size_t n = json_array_size(drivers);

	printf("drivers (%zu):\n", n);
	if (!n)
		printf("  none found yet (ffmd looks for libcuda at start and when a job's process "
		       "starts)\n");
	for (size_t i = 0; i < n; i++) {
		const json_t *d = json_array_get(drivers, i);

		printf("  %s\n", ffm_json_get_str(d, "path", "?"));
		if (!ffm_json_get_bool(d, "usable", false)) {
			printf("      unusable: %s\n", ffm_json_get_str(d, "error", "?"));
			continue;
		}
		printf("      version %s, build-id %s\n", ffm_json_get_str(d, "version", "?"),
		       ffm_json_get_str(d, "build_id", "?"));
		printf("      wait function at %s (%.0f bytes), %.0f probes attached\n",
		       ffm_json_get_str(d, "wait_offset", "?"),
		       ffm_json_get_num(d, "wait_size", 0),
		       ffm_json_get_num(d, "probes", 0));
	}
}

/* The bridge: said only where ffmd can have it (per-process scope, uprobe sessions). */
static void print_bridge(const json_t *b)
{
	if (!b || !ffm_json_get_bool(b, "possible", false))
		return;
	printf("bridge: %s, on %.0f driver%s, serving %.0f job%s (attached %.0f, taken off %.0f "
	       "times)\n\n", ffm_json_get_bool(b, "open", false) ? "open" :
	       ffm_json_get_num(b, "drivers", 0) ? "closing" : "off",
	       ffm_json_get_num(b, "drivers", 0), ffm_json_get_num(b, "drivers", 0) == 1 ? "" : "s",
	       ffm_json_get_num(b, "jobs", 0), ffm_json_get_num(b, "jobs", 0) == 1 ? "" : "s",
	       ffm_json_get_num(b, "attaches", 0), ffm_json_get_num(b, "detaches", 0));
}

/* A stage-1 job's adaptive sampling (ffmd's status "sampling" of a job). */
static void print_sampling(const json_t *sm)
{
	if (!sm || !ffm_json_get_num(sm, "processes", 0))
		return;
	printf("  %-16s adaptive stage 1: %.0f of %.0f processes sampled now, %.0f waits/s, "
	       "est. cost %.3f%%, %.0f back to full tracing, probe on %.1f ms outside each window\n", "",
	       ffm_json_get_num(sm, "sampled_now", 0), ffm_json_get_num(sm, "processes", 0),
	       ffm_json_get_num(sm, "waits_per_s", 0), ffm_json_get_num(sm, "cost_pct", 0),
	       ffm_json_get_num(sm, "retraced", 0), ffm_json_get_num(sm, "off_lag_ms", 0));
}

static void print_jobs(const json_t *jobs)
{
	size_t n = json_array_size(jobs);
	int jw = 16, kw = 20, ow = 10; /* as wide as their longest value, as in ffmctl jobs */
	char owner[64];

	printf("\nactive jobs (%zu):\n", n);
	if (!n) {
		printf("  none (start one with: ffmctl job start <jobid> --cgroup PATH ...)\n");
		return;
	}
	for (size_t i = 0; i < n; i++) {
		const json_t *j = json_array_get(jobs, i);

		jw = col_width(jw, strlen(ffm_json_get_str(j, "job", "?")));
		kw = col_width(kw, strlen(ffm_json_get_str(j, "key", "?")));
		ow = col_width(ow, strlen(user_name((uint32_t)ffm_json_get_num(j, "owner", 0), owner,
						    sizeof(owner))));
	}
	printf("  %-*s %-*s %-*s %5s %10s %10s %12s %8s  %s\n", jw, "JOB", kw, "KEY", ow, "OWNER",
	       "STAGE", "RUNNING", "EVENTS", "EVENTS/S", "DROPS", "PROCESSES");
	for (size_t i = 0; i < n; i++) {
		const json_t *j = json_array_get(jobs, i), *procs = json_object_get(j, "processes");
		json_t *drops = json_object_get(j, "drops"), *d;
		const char *reason;
		double ndrops = 0;
		char running[32];

		/* Every drop reason counts: each is a record the report will not have. */
		json_object_foreach(drops, reason, d)
			ndrops += ffm_json_num(d, 0);
		snprintf(running, sizeof(running), "%.1f s", ffm_json_get_num(j, "running_s", 0));
		printf("  %-*s %-*s %-*s %5.0f %10s %10.0f %12.1f %8.0f  ", jw,
		       ffm_json_get_str(j, "job", "?"), kw, ffm_json_get_str(j, "key", "?"), ow,
		       user_name((uint32_t)ffm_json_get_num(j, "owner", 0), owner, sizeof(owner)),
		       ffm_json_get_num(j, "stage", 0), running,
		       ffm_json_get_num(j, "events", 0),
		       ffm_json_get_num(j, "events_per_s", 0), ndrops);
		if (!json_array_size(procs))
			printf("(none yet)");
		for (size_t k = 0; k < json_array_size(procs); k++)
			printf("%s%.0f", k ? "," : "", ffm_json_num(json_array_get(procs, k), 0));
		printf("\n");
		print_sampling(json_object_get(j, "sampling"));
		ffmctl_print_overhead(stdout, json_object_get(j, "overhead"), "    ");
		if (ndrops > 0) {
			printf("  %-*s drops:", jw, "");
			json_object_foreach(drops, reason, d)
				if (ffm_json_num(d, 0) > 0)
					printf(" %.0f %s", ffm_json_num(d, 0), reason);
			printf("\n");
		}
	}
}

static const char STATUS_HELP[] =
	"Usage: ffmctl status [--json]\n"
	"\n"
	"What ffmd does now: the libcuda files it knows, the active jobs (owner, stage, events,\n"
	"events/s, drops, processes), its probe mode and scope. A user sees only their own jobs.\n"
	"\n"
	"Options:\n"
	"  -j, --json   ffmd's answer as JSON, as it came\n";

int ffmctl_status(int argc, char **argv)
{
	struct ffm_reply *rep;
	json_error_t perr;
	json_t *st;
	bool json = false;
	int r;

	r = ffmctl_json_opts("status", STATUS_HELP, argc, argv, &json, false);
	if (r >= 0)
		return r;
	if (!(rep = ffmctl_call("status", FFM_VERB_STATUS, NULL, 0)))
		return EXIT_FAIL;
	if (json) {
		fputs(rep->body, stdout);
		ffm_reply__free(rep);
		return EXIT_OK;
	}
	st = ffm_json_parse(rep->body, rep->body_len, &perr);
	if (!st) {
		ffmctl_err("status", "ffmd's status is not valid JSON (%s at byte %d); "
			   "'ffmctl status --json' shows it as it came", perr.text, perr.position);
		ffm_reply__free(rep);
		return EXIT_FAIL;
	}
	printf("ffmd on %s/%s: protocol %.0f, uprobes as %s (%s), map guard %s\n\n", ffmctl_g.runtime_dir,
	       FFM_PROTO_SOCKET, ffm_json_get_num(st, "version", 0),
	       ffm_json_get_str(st, "probe_mode", "?"),
	       !strcmp(ffm_json_get_str(st, "probe_scope", "system"), "process") ? "per job process"
											: "system-wide",
	       ffm_json_get_bool(st, "map_guard", false) ? "on" : "off");
	{
		const json_t *sm = json_object_get(st, "sampling");
		double b = ffm_json_get_num(sm, "budget_pct", 0);

		if (sm && b > 0 && strcmp(ffm_json_get_str(st, "probe_scope", "system"), "process"))
			printf("adaptive stage 1: off: probe_scope = system (a process's wait probe cannot be "
			       "taken off alone)\n\n");
		else if (sm && b > 0)
			printf("adaptive stage 1: budget %.3g%% of a process's time, %.2f us per traced wait; "
			       "probe put back in %.2f ms, taken off in %.2f ms (means)\n\n",
			       b, ffm_json_get_num(sm, "wait_cost_us", 0), ffm_json_get_num(sm, "attach_ms", 0),
			       ffm_json_get_num(sm, "detach_ms", 0));
		else if (sm)
			printf("adaptive stage 1: off (sample_budget = 0): every wait is traced\n\n");
	}
	print_bridge(json_object_get(st, "bridge"));
	print_drivers(json_object_get(st, "drivers"));
	print_jobs(json_object_get(st, "jobs"));
	json_decref(st);
	ffm_reply__free(rep);
	return EXIT_OK;
}

/* ---- jobs --------------------------------------------------------------------------------- */

struct job_row {
	char *job_id, *key, *node;
	char *exe;     /* the program its first process ran (NULL: none recorded) */
	int64_t first_run;
	uint32_t uid, runs, stages_done;
	int32_t state;
	int64_t start_unix, end_unix;
};

struct jobs_ctx {
	struct job_row *rows;
	size_t n, cap;
	int unreadable, last_err;
	const char *key;  /* of the store being listed */
	const char *node; /* ... and its node (nodes/<node>/keys/), NULL for <state>/keys/ */
	bool per_node;	  /* a store of a node's was listed */
	size_t first;	  /* the first row of the store being listed */
};

static int on_job(const struct ffm_store_job_info *j, void *ctx)
{
	struct jobs_ctx *c = ctx;
	struct job_row *r;

	if (FFM_GROW(c->rows, c->cap, c->n + 1) < 0)
		return -ENOMEM;
	r = &c->rows[c->n];
	*r = (struct job_row){ .uid = j->uid, .runs = j->runs, .stages_done = j->stages_done,
			       .state = j->state, .start_unix = j->start_unix, .end_unix = j->end_unix };
	r->job_id = strdup(j->job_id ? j->job_id : "");
	r->key = strdup(j->key ? j->key : c->key);
	r->node = strdup(j->node ? j->node : c->node ? c->node : "");
	if (!r->job_id || !r->key || !r->node) {
		free(r->job_id);
		free(r->key);
		free(r->node);
		return -ENOMEM;
	}
	c->n++;
	return 0;
}

/* The first run of each job listed from this store (@c->rows from @c->first on). */
static int on_run(const struct ffm_store_run *r, void *ctx)
{
	struct jobs_ctx *c = ctx;

	for (size_t i = c->first; i < c->n && r->job_id; i++)
		if (!c->rows[i].first_run && !strcmp(c->rows[i].job_id, r->job_id))
			c->rows[i].first_run = r->id;
	return 0;
}

/* The first process of a run (start order) with a program name. */
static int on_process(const struct ffm_store_process *p, void *ctx)
{
	char **exe = ctx;

	if (!p->exe || !*p->exe)
		return 0;
	*exe = strdup(p->exe);
	return *exe ? 1 : -ENOMEM;
}

/* Each job's command: its first run's first process's program, else the key's. */
static int job_commands(struct ffm_store *s, struct jobs_ctx *c)
{
	struct ffm_store_key k = {};
	int r = ffm_store__for_each_run(s, on_run, c);

	for (size_t i = c->first; i < c->n && r >= 0; i++) {
		if (c->rows[i].first_run)
			r = ffm_store__for_each_process(s, c->rows[i].first_run, on_process,
							&c->rows[i].exe);
		if (r == 1)
			r = 0;
		if (r >= 0 && !c->rows[i].exe && !ffm_store__key(s, &k) && k.exe && *k.exe &&
		    !(c->rows[i].exe = strdup(k.exe)))
			r = -ENOMEM;
	}
	return r;
}

static int on_store(const struct ffm_state_store *st, void *ctx)
{
	struct jobs_ctx *c = ctx;
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true, .immutable = st->published };
	struct ffm_store *s = NULL;
	int r, err = st->err;

	if (err < 0 || (err = ffm_store__open(st->path, &so, &s)) < 0) {
		/* One unreadable store does not hide the others; the count is reported. */
		c->unreadable++;
		c->last_err = err;
		return 0;
	}
	c->key = st->key;
	c->node = st->node;
	c->per_node |= st->node != NULL;
	c->first = c->n;
	r = ffm_store__for_each_job(s, on_job, c);
	if (r >= 0)
		r = job_commands(s, c);
	ffm_store__free(s);
	if (r == -ENOMEM)
		return r;
	if (r < 0) {
		c->unreadable++;
		c->last_err = r;
	}
	return 0;
}

static int cmp_row(const void *a, const void *b)
{
	const struct job_row *x = a, *y = b;

	if (x->start_unix != y->start_unix)
		return x->start_unix < y->start_unix ? -1 : 1;
	return strcmp(x->job_id, y->job_id);
}

static const char *state_name(int32_t s)
{
	static const char *const names[] = { [FFM_JOB_RUNNING] = "running", [FFM_JOB_DONE] = "done",
					      [FFM_JOB_FAILED] = "failed",
					      [FFM_JOB_CANCELLED] = "cancelled" };

	return s >= FFM_JOB_RUNNING && s <= FFM_JOB_CANCELLED ? names[s] : "unknown";
}

static void stages_text(uint32_t done, char *buf, size_t len)
{
	size_t off = 0;

	buf[0] = 0;
	for (int s = 1; s <= FFM_STORE_MAX_STAGE && off < len; s++)
		if (done & FFM_STAGE_BIT(s))
			off += (size_t)snprintf(buf + off, len - off, "%s%d", off ? "," : "", s);
	if (!off)
		snprintf(buf, len, "-");
}

static json_t *job_json(const struct job_row *j)
{
	json_t *stages = json_array();
	char user[64];

	for (int s = 1; s <= FFM_STORE_MAX_STAGE; s++)
		if (j->stages_done & FFM_STAGE_BIT(s))
			stages = ffm_json_append(stages, json_integer(s));
	return json_pack("{s:o,s:o,s:I,s:o,s:I,s:o,s:s,s:I,s:I,s:o,s:o}",
			 "job", ffm_json_string(j->job_id), "key", ffm_json_string(j->key),
			 "uid", (json_int_t)j->uid,
			 "user", ffm_json_string(user_name(j->uid, user, sizeof(user))),
			 "runs", (json_int_t)j->runs, "stages_done", stages,
			 "state", state_name(j->state), "start_unix", (json_int_t)j->start_unix,
			 "end_unix", (json_int_t)j->end_unix, "node", ffm_json_string(j->node),
			 "exe", j->exe ? ffm_json_string(j->exe) : json_null());
}

static int print_jobs_json(const struct jobs_ctx *c)
{
	json_t *list = json_array();

	for (size_t i = 0; i < c->n; i++)
		list = ffm_json_append(list, job_json(&c->rows[i]));
	return ffm_json_print(stdout, list);
}

static const char JOBS_HELP[] =
	"Usage: ffmctl jobs [--json]\n"
	"\n"
	"Every job recorded under the state directory, newest last, read from the stores (no\n"
	"daemon needed): job, key, owner, runs, stages done, state, start time, node (for a\n"
	"per-node state directory) and the command its first process ran.\n"
	"\n"
	"Options:\n"
	"  -j, --json   the list as JSON\n";

int ffmctl_jobs(int argc, char **argv)
{
	struct jobs_ctx c = {};
	bool json = false;
	int r, err;

	r = ffmctl_json_opts("jobs", JOBS_HELP, argc, argv, &json, false);
	if (r >= 0)
		return r;
	/* every store of the state directory, every node's (none yet: nothing recorded) */
	err = ffm_state_for_each_store(ffmctl_g.state_dir, on_store, &c);
	if (err < 0) {
		ffmctl_err("jobs", "cannot list the stores under %s: %s%s", ffmctl_g.state_dir,
			   strerror(-err), err == -EACCES ? ffmctl_access_hint() : "");
		r = EXIT_FAIL;
		goto out;
	}
	if (c.n) /* NULL when no job is recorded: qsort(NULL, 0) is UB */
		qsort(c.rows, c.n, sizeof(c.rows[0]), cmp_row);
	if (json) {
		err = print_jobs_json(&c);
		if (err < 0) {
			ffmctl_err("jobs", "cannot write the list: %s", strerror(-err));
			r = EXIT_FAIL;
			goto out;
		}
	} else if (!c.n) {
		printf("no jobs recorded under %s\n", ffmctl_g.state_dir);
	} else {
		/* Columns as wide as their longest id (the same word as status: OWNER). */
		int jw = 16, kw = 20, ow = 10, nw = 8;
		char user[64];

		for (size_t i = 0; i < c.n; i++) {
			jw = col_width(jw, strlen(c.rows[i].job_id));
			kw = col_width(kw, strlen(c.rows[i].key));
			ow = col_width(ow, strlen(user_name(c.rows[i].uid, user, sizeof(user))));
		}
		for (size_t i = 0; i < c.n; i++)
			nw = col_width(nw, strlen(c.rows[i].node));
		printf("%-*s %-*s %-*s %4s %-7s %-9s %-19s", jw, "JOB", kw, "KEY", ow, "OWNER",
		       "RUNS", "STAGES", "STATE", "STARTED");
		/* a column of nodes once a store of a node's is listed */
		if (c.per_node)
			printf(" %-*s", nw, "NODE");
		printf(" COMMAND\n");
		for (size_t i = 0; i < c.n; i++) {
			const struct job_row *j = &c.rows[i];
			char stages[32], when[32];
			time_t t = (time_t)j->start_unix;
			struct tm tm;

			stages_text(j->stages_done, stages, sizeof(stages));
			if (!localtime_r(&t, &tm) || !strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S", &tm))
				snprintf(when, sizeof(when), "%" PRId64, j->start_unix);
			printf("%-*s %-*s %-*s %4u %-7s %-9s %-19s", jw, j->job_id, kw, j->key, ow,
			       user_name(j->uid, user, sizeof(user)), j->runs, stages, state_name(j->state),
			       when);
			if (c.per_node)
				printf(" %-*s", nw, j->node);
			printf(" %s\n", j->exe ? j->exe : "-");
		}
	}
	if (c.unreadable)
		ffmctl_err("jobs", "%d store%s under %s could not be read (%s)%s", c.unreadable,
			   c.unreadable == 1 ? "" : "s", ffmctl_g.state_dir, ffm_store__strerror(c.last_err),
			   c.last_err == -EACCES ? ": run as root or as a member of ffmd's admin group" : "");
	r = c.unreadable ? EXIT_FAIL : EXIT_OK;
out:
	for (size_t i = 0; i < c.n; i++) {
		free(c.rows[i].job_id);
		free(c.rows[i].key);
		free(c.rows[i].node);
		free(c.rows[i].exe);
	}
	free(c.rows);
	return r;
}
