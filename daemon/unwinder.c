/* SPDX-License-Identifier: MIT */
/* Stacks unwound and symbolized on a worker thread (daemon/unwinder.h, daemon/worker.h). */
#include <errno.h>
#include <stdlib.h>

#include "common/util.h"
#include "daemon/unwinder.h"
#include "daemon/worker.h"

struct ffm_unwinder {
	struct ffm_worker *w;
};

void ffm_unwind_run(struct ffm_symbolizer *sym, struct ffm_unwind_req *req)
{
	uint64_t t0 = ffm_now_ns();

	if (req->pre) {
		req->pre(req);
		req->pre_ns = ffm_now_ns() - t0;
		t0 += req->pre_ns;
	}
	req->n = req->as ? ffm_stack__unwind(sym, req->as, &req->snap, req->frames,
					     FFM_UNWIND_MAX_FRAMES) : 0;
	if (req->n <= 0) {
		req->n = 0;
		for (int i = 0; i < req->npcs && i < FFM_UNWIND_MAX_FRAMES; i++)
			req->frames[req->n++] = (struct ffm_frame){ .pc = req->pcs[i] };
	}
	/* Every probe of ours fires at a return (uretprobe), so even frame 0's ip is a return
	 * address: look up the call instruction, pc-1, for the right line. */
	for (int i = 0; i < req->n; i++)
		if (!req->as ||
		    ffm_symbolizer__symbolize(sym, req->as, req->frames[i].pc, true, &req->syms[i]))
			req->syms[i] = NULL;
	req->ns = ffm_now_ns() - t0;
}

static void *work(void *arg, void *ctx)
{
	ffm_unwind_run(ctx, arg);
	return arg;
}

int ffm_unwinder__new(struct ffm_symbolizer *sym, size_t cap, struct ffm_unwinder **ret)
{
	struct ffm_unwinder *u = calloc(1, sizeof(*u));
	int err;

	*ret = NULL;
	if (!u)
		return -ENOMEM;
	err = ffm_worker__new(cap, work, sym, &u->w);
	if (err < 0) {
		free(u);
		return err;
	}
	*ret = u;
	return 0;
}

int ffm_unwinder__fd(const struct ffm_unwinder *u)
{
	return ffm_worker__fd(u->w);
}

int ffm_unwinder__submit(struct ffm_unwinder *u, struct ffm_unwind_req *req)
{
	return ffm_worker__submit(u->w, req);
}

void ffm_unwinder__take(struct ffm_unwinder *u)
{
	struct ffm_unwind_req *req;

	while ((req = ffm_worker__take(u->w)))
		req->done(req);
}

int ffm_unwinder__wait(struct ffm_unwinder *u)
{
	struct ffm_unwind_req *req = ffm_worker__wait(u->w);

	if (!req)
		return -ENOENT;
	req->done(req);
	return 0;
}

struct ffm_unwinder *ffm_unwinder__free(struct ffm_unwinder *u)
{
	if (!u)
		return NULL;
	ffm_worker__free(u->w, free); /* nobody waits for them any more */
	free(u);
	return NULL;
}
