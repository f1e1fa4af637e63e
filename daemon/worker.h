/* SPDX-License-Identifier: MIT */
/*
 * One worker thread that runs slow requests in order off ffmd's loop (daemon/readier.c: drivers
 * made ready; daemon/analyzer.c: analyses of ended runs; daemon/unwinder.c: stacks unwound and
 * symbolized), or a pool of a few that share one queue (daemon/lookups.c: one user's slow
 * files must not hold another user's lookups). Requests and results are the caller's
 * malloc'd structs; the loop learns of finished ones through an eventfd it polls and takes each
 * result once. At most @cap requests are queued, running or done and not taken.
 *
 * A pool's threads take the oldest request whose key (ffm_worker__submit_key: a user, say) no
 * thread runs: at most one request of a key runs at a time, a key's requests run in order, and
 * a request of another key waits only while every thread is busy with other keys.
 */
#ifndef FFM_WORKER_H
#define FFM_WORKER_H

#include <stddef.h>
#include <stdint.h>

struct ffm_worker;

/* Run @req (owned by the call: free it) and return its result, NULL when out of memory (the
 * request is then dropped: its submitter's entry stays as it was). */
typedef void *(*ffm_worker_fn)(void *req, void *ctx);

int ffm_worker__new(size_t cap, ffm_worker_fn fn, void *ctx, struct ffm_worker **ret);
/* @nthreads threads (at least 1) taking requests by key (above). */
int ffm_worker__new_pool(size_t cap, int nthreads, ffm_worker_fn fn, void *ctx,
			 struct ffm_worker **ret);
/* Readable (EPOLLIN) while results wait to be taken. */
int ffm_worker__fd(const struct ffm_worker *w);
/* Queue @req (the worker's from now on, also when it fails); -ENOSPC when full. */
int ffm_worker__submit(struct ffm_worker *w, void *req);
/* As submit, with @key (0: none; such requests run whenever a thread is free). */
int ffm_worker__submit_key(struct ffm_worker *w, void *req, uint64_t key);
/* A finished result (the taker's), NULL when none is waiting. */
void *ffm_worker__take(struct ffm_worker *w);
/* As take, but first waits while requests are queued or running and none is done (NULL:
 * nothing queued, running or done). Blocks its caller: for a loop that must have a result. */
void *ffm_worker__wait(struct ffm_worker *w);
/* Stops the threads after their current request; @drop frees each result not taken. */
struct ffm_worker *ffm_worker__free(struct ffm_worker *w, void (*drop)(void *result));

#endif
