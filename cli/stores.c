// SPDX-License-Identifier: MIT
/* A job's stores, one a node, opened for ffmctl's verbs, and what a user is told when none is
 * theirs to read (cli/report.h). Split from cli/report.c, which prints what is in them. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/client.h"
#include "cli/ffmctl.h"
#include "cli/report.h"
#include "common/util.h"

/* ---- the job's stores ------------------------------------------------------------------- */

struct node_of_job {
	const char *job_id;
	char node[256];
};

static int on_job(const struct ffm_store_job_info *j, void *ctx)
{
	struct node_of_job *nj = ctx;

	if (j->job_id && !strcmp(j->job_id, nj->job_id) && j->node)
		snprintf(nj->node, sizeof(nj->node), "%s", j->node);
	return 0;
}

struct open_ctx {
	struct ffmctl_job_stores *js;
	const char *job_id;
};

static int add_store(struct ffm_store *s, const char *node, void *ctx)
{
	struct open_ctx *c = ctx;
	struct ffmctl_job_stores *js = c->js;
	struct ffmctl_node *v;

	if (FFM_GROW(js->v, js->cap, js->n + 1)) {
		ffm_store__free(s);
		return -ENOMEM;
	}
	v = &js->v[js->n++];
	v->store = s;
	if (node) {
		snprintf(v->name, sizeof(v->name), "%s", node);
	} else {
		struct node_of_job nj = { .job_id = c->job_id };

		ffm_store__for_each_job(s, on_job, &nj);
		snprintf(v->name, sizeof(v->name), "%s", nj.node[0] ? nj.node : "local");
	}
	return 0;
}

static int cmp_node(const void *a, const void *b)
{
	return strcmp(((const struct ffmctl_node *)a)->name, ((const struct ffmctl_node *)b)->name);
}

/* Whether ffmd says that job @job_id's copy for its readers is being made (its status's
 * "publishing", which names the caller's jobs only): 1 yes, 0 no or no ffmd to ask, -1 ffmd
 * did not answer within @timeout_ms (a busy node: the copy may still be coming). */
static int being_published(const char *job_id, int timeout_ms)
{
	struct ffm_reply *rep = NULL;
	json_t *body = NULL, *v;
	int err, found = 0;
	size_t i;

	err = ffm_client__call(ffmctl_g.runtime_dir, FFM_VERB_STATUS, NULL, 0, timeout_ms, &rep);
	if (err == -ETIMEDOUT)
		return -1;
	if (!err && !rep->status && (body = ffm_json_parse(rep->body, rep->body_len, NULL)))
		json_array_foreach(json_object_get(body, "publishing"), i, v)
			found |= json_is_string(v) && !strcmp(json_string_value(v), job_id);
	json_decref(body);
	ffm_reply__free(rep);
	return found;
}

static int open_once(const char *state_dir, const char *job_id, struct ffmctl_job_stores *out)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .read_only = true };
	struct open_ctx c = { .js = out, .job_id = job_id };
	int err;

	memset(out, 0, sizeof(*out));
	err = ffm_state_open_job(state_dir, job_id, &so, add_store, &c);
	if (err < 0) {
		ffmctl_job_stores__close(out);
		return err;
	}
	if (!out->n)
		return -ENOENT;
	qsort(out->v, out->n, sizeof(*out->v), cmp_node);
	return 0;
}

int ffmctl_job_stores__open(const char *state_dir, const char *job_id,
			    struct ffmctl_job_stores *out)
{
	int err = open_once(state_dir, job_id, out), pub;
	/* A job that just ended: its copy comes once its analysis is stored. Wait for it as
	 * long as for an answer of ffmd, 30 s at most, also while ffmd is too busy to say. */
	int wait_ms = ffmctl_g.timeout_ms < 30000 ? ffmctl_g.timeout_ms : 30000;
	double until = ffm_now_s() + wait_ms / 1e3;

	if (err != -ENOENT || !(pub = being_published(job_id, wait_ms)))
		return err;
	while (ffm_now_s() < until) {
		usleep(100000);
		if ((err = open_once(state_dir, job_id, out)) != -ENOENT)
			return err;
		pub = being_published(job_id, (int)((until - ffm_now_s()) * 1e3) + 1);
		if (!pub)
			return open_once(state_dir, job_id, out);
	}
	return pub < 0 ? -ENOENT : -EINPROGRESS;
}

/* ---- a job no store holds ------------------------------------------------------------- */

#define MAX_REFUSED_NAMED 20

struct refused {
	char *path[MAX_REFUSED_NAMED];
	int err[MAX_REFUSED_NAMED];
	size_t n, more;
};

static int on_store_file(const struct ffm_state_store *st, void *ctx)
{
	struct refused *r = ctx;

	if (st->err >= 0)
		return 0;
	if (r->n == MAX_REFUSED_NAMED) {
		r->more++;
		return 0;
	}
	if (!(r->path[r->n] = strdup(st->path)))
		return -ENOMEM;
	r->err[r->n++] = st->err;
	return 0;
}

static const char *refusal(int err)
{
	switch (err) {
	case -ENOENT:
		return "an ffm store without its key row";
	case -EACCES:
	case -EPERM:
		return geteuid()
			   ? "permission denied"
			   : "permission denied (run as root or as a member of ffmd's admin group)";
	}
	return ffm_store__strerror(err);
}

const char *ffmctl_access_hint(void)
{
	/* docs/SECURITY.md, rule 5: an owner reads the published copies of their jobs. */
	return geteuid() ? " (you read the jobs you own once a run of them has ended, if the state "
			   "directory and done/ let you through (mode 0751) and its file system "
			   "takes POSIX ACLs; to read every job, ask ffmd's admin to add you to "
			   "admin_group)" : "";
}

void ffmctl_no_job_err(const char *verb, const char *state_dir, const char *job_id, int err)
{
	struct refused r = {};

	if (err == -EINPROGRESS) {
		ffmctl_err(verb, "job %s ended; its report is being written, try again in a moment",
			   job_id);
		return;
	}
	if (err != -ENOENT) {
		ffmctl_err(verb, "no job '%s' under %s: %s%s", job_id, state_dir, refusal(err),
			   err == -EACCES || err == -EPERM ? ffmctl_access_hint() : "");
		return;
	}
	/*
	 * The lookup skips store files it cannot use, so "no store holds it" is only what the
	 * usable ones say: name each refused file and why, the job's data may be in one.
	 */
	ffm_state_for_each_store(state_dir, on_store_file, &r);
	if (!r.n) {
		ffmctl_err(verb, "no job '%s' under %s: no store holds it%s (ffmctl jobs lists the "
			   "recorded ones; --state-dir reads another directory)", job_id, state_dir,
			   geteuid() ? " that you may read" : "");
		if (geteuid())
			ffmctl_err(verb, "a user reads only the jobs they own, once a run of them has "
				   "ended; root and ffmd's admin_group read every job");
		return;
	}
	ffmctl_err(verb, "no job '%s' under %s: no usable store holds it, and %zu store%s could "
		   "not be read (the job may be in one):", job_id, state_dir, r.n + r.more,
		   r.n + r.more == 1 ? "" : "s");
	for (size_t i = 0; i < r.n; i++) {
		ffmctl_err(verb, "%s: %s", r.path[i], refusal(r.err[i]));
		free(r.path[i]);
	}
	if (r.more)
		ffmctl_err(verb, "... and %zu more", r.more);
}

void ffmctl_job_stores__close(struct ffmctl_job_stores *js)
{
	for (size_t i = 0; i < js->n; i++) {
		ffm_analysis__free(js->v[i].an);
		ffm_store__free(js->v[i].store);
	}
	free(js->v);
	memset(js, 0, sizeof(*js));
}

