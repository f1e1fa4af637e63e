/* SPDX-License-Identifier: MIT */
/* Worker threads and their queues (daemon/worker.h). */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "daemon/worker.h"

struct ffm_worker {
	ffm_worker_fn fn;
	void *ctx;
	size_t cap;
	int efd;
	pthread_t *th;
	int nth, started; /* threads, and how many of them run */
	bool stop;
	size_t busy;      /* requests running */
	uint64_t *running; /* per thread: the key of its request, 0 none or none keyed */
	pthread_mutex_t mu;
	pthread_cond_t cv, dcv; /* a request queued or a key freed; a result done */
	void **q, **done; /* waiting (oldest first) and finished, cap each */
	uint64_t *qkey;   /* each waiting request's key (0: none) */
	size_t nq, ndone;
};

struct thread_arg {
	struct ffm_worker *w;
	int i; /* its slot in running[] */
};

static void *pop(void **v, size_t *n)
{
	void *x = v[0];

	memmove(v, v + 1, sizeof(v[0]) * --*n);
	return x;
}

/* The oldest waiting request whose key no thread runs: its index, or -1. */
static long pick(const struct ffm_worker *w)
{
	for (size_t i = 0; i < w->nq; i++) {
		bool taken = false;

		for (int k = 0; w->qkey[i] && k < w->nth && !taken; k++)
			taken = w->running[k] == w->qkey[i];
		if (!taken)
			return (long)i;
	}
	return -1;
}

static void *worker(void *arg)
{
	struct thread_arg a = *(struct thread_arg *)arg;
	struct ffm_worker *w = a.w;

	free(arg);
	pthread_mutex_lock(&w->mu);
	for (;;) {
		void *req, *res;
		long i;

		while ((i = pick(w)) < 0 && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (w->stop)
			break;
		req = w->q[i];
		w->running[a.i] = w->qkey[i];
		memmove(w->q + i, w->q + i + 1, sizeof(w->q[0]) * (w->nq - (size_t)i - 1));
		memmove(w->qkey + i, w->qkey + i + 1, sizeof(w->qkey[0]) * (w->nq - (size_t)i - 1));
		w->nq--;
		w->busy++;
		pthread_mutex_unlock(&w->mu);

		res = w->fn(req, w->ctx);

		pthread_mutex_lock(&w->mu);
		w->busy--;
		if (w->running[a.i]) /* its key's next request may run now */
			pthread_cond_broadcast(&w->cv);
		w->running[a.i] = 0;
		if (!res) {
			pthread_cond_broadcast(&w->dcv);
			continue;
		}
		/* done[] has room: submit counts waiting, busy and done against cap. */
		w->done[w->ndone++] = res;
		pthread_cond_broadcast(&w->dcv);
		/* Cannot fail: the counter saturates only after 2^64 - 2 writes. */
		(void)!write(w->efd, &(uint64_t){ 1 }, sizeof(uint64_t));
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

/* The threads, each with every signal blocked (signals are the loop's: signalfd). */
static int start_threads(struct ffm_worker *w)
{
	sigset_t all, old;
	int err = 0;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (int i = 0; i < w->nth && !err; i++) {
		struct thread_arg *a = malloc(sizeof(*a));

		if (!a) {
			err = -ENOMEM;
			break;
		}
		*a = (struct thread_arg){ w, i };
		err = -pthread_create(&w->th[i], NULL, worker, a);
		if (err)
			free(a);
		else
			w->started++;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return err;
}

int ffm_worker__new_pool(size_t cap, int nthreads, ffm_worker_fn fn, void *ctx,
			 struct ffm_worker **ret)
{
	struct ffm_worker *w = calloc(1, sizeof(*w));
	int err;

	*ret = NULL;
	if (!w)
		return -ENOMEM;
	if (nthreads < 1)
		nthreads = 1;
	*w = (struct ffm_worker){ .fn = fn, .ctx = ctx, .cap = cap, .efd = -1, .nth = nthreads };
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	pthread_cond_init(&w->dcv, NULL);
	w->q = calloc(cap, sizeof(*w->q));
	w->qkey = calloc(cap, sizeof(*w->qkey));
	w->done = calloc(cap, sizeof(*w->done));
	w->th = calloc((size_t)nthreads, sizeof(*w->th));
	w->running = calloc((size_t)nthreads, sizeof(*w->running));
	w->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (!w->q || !w->qkey || !w->done || !w->th || !w->running || w->efd < 0) {
		err = w->efd < 0 ? -errno : -ENOMEM;
		ffm_worker__free(w, NULL);
		return err;
	}
	err = start_threads(w);
	if (err) {
		ffm_worker__free(w, NULL);
		return err;
	}
	*ret = w;
	return 0;
}

int ffm_worker__new(size_t cap, ffm_worker_fn fn, void *ctx, struct ffm_worker **ret)
{
	return ffm_worker__new_pool(cap, 1, fn, ctx, ret);
}

int ffm_worker__fd(const struct ffm_worker *w)
{
	return w->efd;
}

int ffm_worker__submit_key(struct ffm_worker *w, void *req, uint64_t key)
{
	int err = 0;

	pthread_mutex_lock(&w->mu);
	if (w->nq + w->ndone + w->busy >= w->cap) {
		err = -ENOSPC;
	} else {
		w->qkey[w->nq] = key;
		w->q[w->nq++] = req;
		/* All: the one woken might find only a key that runs already. */
		pthread_cond_broadcast(&w->cv);
	}
	pthread_mutex_unlock(&w->mu);
	if (err)
		free(req);
	return err;
}

int ffm_worker__submit(struct ffm_worker *w, void *req)
{
	return ffm_worker__submit_key(w, req, 0);
}

void *ffm_worker__take(struct ffm_worker *w)
{
	void *res = NULL;
	uint64_t x;

	pthread_mutex_lock(&w->mu);
	if (w->ndone)
		res = pop(w->done, &w->ndone);
	if (!w->ndone)
		(void)!read(w->efd, &x, sizeof(x)); /* EAGAIN: nothing signalled since the last read */
	pthread_mutex_unlock(&w->mu);
	return res;
}

void *ffm_worker__wait(struct ffm_worker *w)
{
	pthread_mutex_lock(&w->mu);
	while (!w->ndone && (w->nq || w->busy) && !w->stop)
		pthread_cond_wait(&w->dcv, &w->mu);
	pthread_mutex_unlock(&w->mu);
	return ffm_worker__take(w);
}

struct ffm_worker *ffm_worker__free(struct ffm_worker *w, void (*drop)(void *result))
{
	if (!w)
		return NULL;
	if (w->started) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		pthread_cond_broadcast(&w->cv);
		pthread_mutex_unlock(&w->mu);
		for (int i = 0; i < w->started; i++)
			pthread_join(w->th[i], NULL);
	}
	for (size_t i = 0; i < w->nq; i++)
		free(w->q[i]);
	for (size_t i = 0; i < w->ndone; i++)
		if (drop)
			drop(w->done[i]);
	if (w->efd >= 0)
		close(w->efd);
	free(w->q);
	free(w->qkey);
	free(w->done);
	free(w->th);
	free(w->running);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	pthread_cond_destroy(&w->dcv);
	free(w);
	return NULL;
}
