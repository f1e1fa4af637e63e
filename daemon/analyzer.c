/* SPDX-License-Identifier: MIT */
/* The analyses of ended runs, on a worker thread (daemon/analyzer.h). */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "analysis/ffm_analysis.h"
#include "daemon/analyzer.h"

#define QUEUE 32

struct request {
	char root[PATH_MAX];
	char key[128];
	char job_id[128];
};

struct ffm_analyzer {
	char *tool_version;
	int efd;
	pthread_t th;
	bool started, stop;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct request q[QUEUE]; /* waiting, oldest first */
	int nq;
	struct ffm_analyzer_result done[QUEUE];
	int ndone;
	bool busy;
};

/* One analysis, with the worker's own connection to the store. */
static void analyse(const struct ffm_analyzer *a, const struct request *rq,
		    struct ffm_analyzer_result *res)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .tool_version = a->tool_version };
	struct ffm_store *s = NULL;

	snprintf(res->job_id, sizeof(res->job_id), "%s", rq->job_id);
	res->err = ffm_store__open_key(rq->root, &(struct ffm_store_key){ .key = rq->key }, &so, &s);
	if (!res->err)
		res->err = ffm_analysis__store_job(s, rq->job_id, a->tool_version, &res->head);
	ffm_store__free(s);
}

static void *worker(void *arg)
{
	struct ffm_analyzer *a = arg;
	struct ffm_analyzer_result res;
	struct request rq;

	pthread_mutex_lock(&a->mu);
	for (;;) {
		while (!a->nq && !a->stop)
			pthread_cond_wait(&a->cv, &a->mu);
		if (a->stop)
			break;
		rq = a->q[0];
		memmove(a->q, a->q + 1, sizeof(a->q[0]) * (size_t)--a->nq);
		a->busy = true;
		pthread_mutex_unlock(&a->mu);

		memset(&res, 0, sizeof(res));
		analyse(a, &rq, &res);

		pthread_mutex_lock(&a->mu);
		a->busy = false;
		/* done[] has room: submit counts waiting, busy and done against QUEUE. */
		a->done[a->ndone++] = res;
		(void)!write(a->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
	}
	pthread_mutex_unlock(&a->mu);
	return NULL;
}

int ffm_analyzer__new(const char *tool_version, struct ffm_analyzer **ret)
{
	struct ffm_analyzer *a = calloc(1, sizeof(*a));
	sigset_t all, old;
	int err;

	*ret = NULL;
	if (!a)
		return -ENOMEM;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->cv, NULL);
	a->tool_version = strdup(tool_version ? tool_version : "unknown");
	a->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!a->tool_version || a->efd < 0) {
		err = a->tool_version ? -errno : -ENOMEM;
		ffm_analyzer__free(a);
		return err;
	}
	/* Signals are the loop's (signalfd): the thread starts with every one blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	err = -pthread_create(&a->th, NULL, worker, a);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		ffm_analyzer__free(a);
		return err;
	}
	a->started = true;
	*ret = a;
	return 0;
}

int ffm_analyzer__fd(const struct ffm_analyzer *a)
{
	return a->efd;
}

int ffm_analyzer__submit(struct ffm_analyzer *a, const char *root, const char *key,
			 const char *job_id)
{
	struct request *rq;
	int err = 0;

	if (strlen(root) >= sizeof(rq->root) || strlen(key) >= sizeof(rq->key) ||
	    strlen(job_id) >= sizeof(rq->job_id))
		return -ENAMETOOLONG;
	pthread_mutex_lock(&a->mu);
	if (a->nq + a->ndone + a->busy >= QUEUE) {
		err = -ENOSPC;
	} else {
		rq = &a->q[a->nq++];
		strcpy(rq->root, root);
		strcpy(rq->key, key);
		strcpy(rq->job_id, job_id);
		pthread_cond_signal(&a->cv);
	}
	pthread_mutex_unlock(&a->mu);
	return err;
}

int ffm_analyzer__take(struct ffm_analyzer *a, struct ffm_analyzer_result *out)
{
	int err = -EAGAIN;
	uint64_t x;

	pthread_mutex_lock(&a->mu);
	if (a->ndone) {
		*out = a->done[0];
		memmove(a->done, a->done + 1, sizeof(a->done[0]) * (size_t)--a->ndone);
		err = 0;
	}
	if (!a->ndone)
		(void)!read(a->efd, &x, sizeof(x)); /* EAGAIN: nothing signalled since the last read */
	pthread_mutex_unlock(&a->mu);
	return err;
}

struct ffm_analyzer *ffm_analyzer__free(struct ffm_analyzer *a)
{
	if (!a)
		return NULL;
	if (a->started) {
		pthread_mutex_lock(&a->mu);
		a->stop = true;
		pthread_cond_signal(&a->cv);
		pthread_mutex_unlock(&a->mu);
		pthread_join(a->th, NULL);
	}
	if (a->efd >= 0)
		close(a->efd);
	free(a->tool_version);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->cv);
	free(a);
	return NULL;
}
