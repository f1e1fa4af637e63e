/* SPDX-License-Identifier: MIT */
/*
 * The workers off ffmd's loop (daemon/worker.h). A pool takes requests by key (a user, for the
 * lookups of daemon/lookups.c): one key's slow requests hold one thread, another key's request
 * runs meanwhile (docs/SECURITY.md, "Nothing a job's user controls blocks ffmd's loop"); a key's
 * requests run one at a time, in order; a single worker runs everything in order.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/util.h"
#include "daemon/worker.h"
#include "tests/testutil.h"

struct req {
	uint64_t key;
	int ms, seq;
	uint64_t start_ns, end_ns;
};

static atomic_int running[3]; /* per key: requests running now */
static atomic_int most[3];    /* per key: the most that ran at once */

static void *work(void *arg, void *ctx)
{
	struct req *r = arg;
	int n = atomic_fetch_add(&running[r->key], 1) + 1;

	(void)ctx;
	if (n > atomic_load(&most[r->key]))
		atomic_store(&most[r->key], n);
	r->start_ns = ffm_now_ns();
	usleep((useconds_t)r->ms * 1000);
	r->end_ns = ffm_now_ns();
	atomic_fetch_sub(&running[r->key], 1);
	return r;
}

static struct req *req(uint64_t key, int ms, int seq)
{
	struct req *r = calloc(1, sizeof(*r));

	ASSERT(r);
	*r = (struct req){ .key = key, .ms = ms, .seq = seq };
	return r;
}

/* Key 1 submits three requests of 300 ms, then key 2 one of none: key 2's is done within
 * 150 ms of its submission (in order, it would wait 900 ms). */
TEST(pool_other_key_not_behind_slow_key)
{
	struct ffm_worker *w;
	struct req *r, *fast = NULL;
	uint64_t t0;
	int last1 = 0, n = 0;

	atomic_store(&most[1], 0);
	ASSERT_OK(ffm_worker__new_pool(16, 4, work, NULL, &w));
	for (int i = 1; i <= 3; i++)
		ASSERT_OK(ffm_worker__submit_key(w, req(1, 300, i), 1));
	t0 = ffm_now_ns();
	ASSERT_OK(ffm_worker__submit_key(w, req(2, 0, 1), 2));
	while (n < 4 && (r = ffm_worker__wait(w))) {
		n++;
		if (r->key == 2) {
			fast = r;
			continue;
		}
		ASSERT_MSG(r->seq == last1 + 1, "key 1's request %d done after %d", r->seq, last1);
		last1 = r->seq;
		free(r);
	}
	ASSERT_EQ(n, 4);
	ASSERT(fast);
	ASSERT_MSG(fast->end_ns - t0 < 150000000ull, "key 2's request done after %.0f ms",
		   (fast->end_ns - t0) / 1e6);
	free(fast);
	ASSERT_MSG(atomic_load(&most[1]) == 1, "%d of key 1's requests ran at once",
		   atomic_load(&most[1]));
	ffm_worker__free(w, free);
}

/* Requests without a key use every thread; a single worker runs all in order. */
TEST(unkeyed_and_single)
{
	struct ffm_worker *w;
	struct req *r;
	uint64_t t0 = ffm_now_ns();
	int seq = 0;

	ASSERT_OK(ffm_worker__new_pool(16, 3, work, NULL, &w));
	for (int i = 1; i <= 3; i++)
		ASSERT_OK(ffm_worker__submit(w, req(0, 200, i)));
	for (int i = 0; i < 3; i++) {
		ASSERT((r = ffm_worker__wait(w)));
		free(r);
	}
	ASSERT_MSG(ffm_now_ns() - t0 < 500000000ull, "3 requests of 200 ms on 3 threads: %.0f ms",
		   (ffm_now_ns() - t0) / 1e6);
	ASSERT(!ffm_worker__wait(w));
	ffm_worker__free(w, free);

	ASSERT_OK(ffm_worker__new(4, work, NULL, &w));
	for (int i = 1; i <= 4; i++)
		ASSERT_OK(ffm_worker__submit_key(w, req(i % 2 + 1, 10, i), (uint64_t)(i % 2 + 1)));
	ASSERT_EQ(ffm_worker__submit(w, req(0, 0, 5)), -ENOSPC); /* cap */
	for (int i = 1; i <= 4; i++) {
		ASSERT((r = ffm_worker__wait(w)));
		ASSERT_MSG(r->seq == ++seq, "request %d done as the %dth", r->seq, seq);
		free(r);
	}
	ffm_worker__free(w, free);
}

/* Freed with requests queued and running: the threads stop, nothing leaks. */
TEST(free_while_busy)
{
	struct ffm_worker *w;

	ASSERT_OK(ffm_worker__new_pool(8, 2, work, NULL, &w));
	for (int i = 1; i <= 6; i++)
		ASSERT_OK(ffm_worker__submit_key(w, req((uint64_t)(i % 2 + 1), 20, i),
						 (uint64_t)(i % 2 + 1)));
	usleep(5000);
	ffm_worker__free(w, free);
}

TEST_MAIN()
