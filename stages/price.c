/* SPDX-License-Identifier: MIT */
/* Pricing a fix with the node model: see ffm_price.h for the rules. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "stages/ffm_price.h"

static int bad(struct ffm_price *out, int err, const char *why)
{
	out->why = why;
	return err;
}

static int check_call(const struct ffm_price_call *c, struct ffm_price *out)
{
	if ((unsigned)c->kind >= FFM_PRICE_KINDS)
		return bad(out, -EINVAL, "kind");
	if ((unsigned)c->mem >= FFM_MEM_KINDS)
		return bad(out, -EINVAL, "memory kind");
	if ((unsigned)c->dir >= FFM_COPY_DIRS)
		return bad(out, -EINVAL, "direction");
	if ((unsigned)c->mode >= FFM_SCHED_MODES)
		return bad(out, -EINVAL, "schedule mode");
	if (!isfinite(c->call_ns) || !isfinite(c->wait_ns) || c->wait_ns < 0 ||
	    (c->call_ns >= 0 && c->wait_ns > c->call_ns))
		return bad(out, -EINVAL, "call or wait time");
	if ((c->kind == FFM_PRICE_COPY || c->kind == FFM_PRICE_MEMSET) && !c->bytes)
		return bad(out, -EINVAL, "bytes");
	return 0;
}

static bool managed_write(const struct ffm_price_call *c)
{
	return c->kind == FFM_PRICE_MEMSET && c->mem == FFM_MEM_MANAGED;
}

static uint64_t pages_of(const struct ffm_node_model *nm, uint64_t bytes)
{
	return (bytes + nm->page_size - 1) / nm->page_size;
}

/*
 * One call's cost, per call, into @out's parts (not yet multiplied by the calls): its own time,
 * recorded or modeled; the migration to the device of a managed write after the host touched
 * the pages (only where the recorded time cannot hold it: not recorded, or the call did not
 * wait for the GPU); the host's page faults after a managed write.
 */
static int cost_of(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		   struct ffm_price *out)
{
	bool migrates = managed_write(c) && c->host_touched_before;
	bool faults = managed_write(c) && (c->host_faults > 0 || c->host_touches_after);

	if (c->call_ns >= 0) {
		out->own_ns = c->call_ns;
	} else if (c->kind == FFM_PRICE_COPY) {
		out->own_ns = ffm_node_model__copy_ns(nm, c->dir, c->mem, c->bytes);
		if (out->own_ns < 0)
			return bad(out, -ENODATA, "copy time");
		out->modeled = true;
	} else if (c->kind != FFM_PRICE_MEMSET || c->mem != FFM_MEM_MANAGED) {
		return bad(out, -ENODATA, "call time");
	}
	if ((migrates || faults) && (!nm || !nm->page_size))
		return bad(out, -ENODATA, "migration cost");
	if (migrates && (c->call_ns < 0 || c->wait_ns <= 0)) {
		out->migrate_ns = (double)pages_of(nm, c->bytes) * nm->to_device_ns_per_page;
		out->modeled = true;
	}
	if (faults) {
		uint64_t n = c->host_faults >= 0 ? (uint64_t)c->host_faults : pages_of(nm, c->bytes);

		out->fault_ns = (double)n * nm->to_host_ns_per_page;
		out->modeled = true;
	}
	return 0;
}

static void scale(struct ffm_price *p, double k)
{
	p->own_ns *= k;
	p->migrate_ns *= k;
	p->fault_ns *= k;
	p->staging_ns *= k;
	p->overlap_ns *= k;
	p->exit_ns *= k;
}

static double sum(const struct ffm_price *p)
{
	return p->own_ns + p->migrate_ns + p->fault_ns + p->staging_ns + p->overlap_ns + p->exit_ns;
}

/* Clear @out and check one call: where every rule on a call begins. */
static int begin(const struct ffm_price_call *c, struct ffm_price *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!c)
		return bad(out, -EINVAL, "call");
	return check_call(c, out);
}

int ffm_price__delete(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		      struct ffm_price *out)
{
	int err = begin(c, out);

	if (!err)
		err = cost_of(nm, c, out);
	if (err)
		return err;
	scale(out, (double)c->calls);
	out->saved_ns = sum(out);
	return 0;
}

int ffm_price__pin(const struct ffm_node_model *nm, const struct ffm_price_call *c,
		   struct ffm_price *out)
{
	int err = begin(c, out);
	double staging;

	if (err)
		return err;
	if (c->kind != FFM_PRICE_COPY || c->mem != FFM_MEM_PAGEABLE)
		return bad(out, -EINVAL, "not a pageable copy");
	/* Both speeds from the model: a recorded copy time holds waits for earlier work too. */
	staging = ffm_node_model__staging_ns(nm, c->dir, c->bytes);
	if (staging < 0)
		return bad(out, -ENODATA, "copy time");
	out->staging_ns = staging * (double)c->calls;
	out->modeled = true;
	out->saved_ns = out->staging_ns;
	return 0;
}

int ffm_price__reuse(const struct ffm_node_model *nm, const struct ffm_price_call *calls,
		     size_t n, struct ffm_price *out)
{
	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!calls || !n)
		return bad(out, -EINVAL, "calls");
	for (size_t i = 0; i < n; i++) {
		/* The buffer that stays keeps one allocation and one free. */
		uint64_t keep = calls[i].kind == FFM_PRICE_ALLOC || calls[i].kind == FFM_PRICE_FREE;
		struct ffm_price_call c = calls[i];
		struct ffm_price p;
		int err;

		c.calls = c.calls > keep ? c.calls - keep : 0;
		err = ffm_price__delete(nm, &c, &p);
		if (err)
			return bad(out, err, p.why);
		out->own_ns += p.own_ns;
		out->migrate_ns += p.migrate_ns;
		out->fault_ns += p.fault_ns;
		out->modeled |= p.modeled;
	}
	out->saved_ns = sum(out);
	return 0;
}

int ffm_price__move_wait(const struct ffm_node_model *nm, const struct ffm_price_wait *w,
			 struct ffm_price *out)
{
	double after, e0, e1;

	if (!out)
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	if (!w)
		return bad(out, -EINVAL, "wait");
	if ((unsigned)w->mode >= FFM_SCHED_MODES)
		return bad(out, -EINVAL, "schedule mode");
	if (!isfinite(w->wait_ns) || !isfinite(w->moved_ns) || w->wait_ns < 0 || w->moved_ns < 0)
		return bad(out, -EINVAL, "wait or moved time");
	after = w->wait_ns > w->moved_ns ? w->wait_ns - w->moved_ns : 0;
	e0 = ffm_node_model__exit_ns(nm, w->mode, (uint64_t)w->wait_ns);
	e1 = ffm_node_model__exit_ns(nm, w->mode, (uint64_t)after);
	if (e0 == -1 || e1 == -1)
		return bad(out, -ENODATA, "exit latency");
	out->overlap_ns = (w->wait_ns - after) * (double)w->calls;
	out->exit_ns = (e0 - e1) * (double)w->calls;
	out->modeled = true;
	out->saved_ns = out->overlap_ns + out->exit_ns;
	return 0;
}

int ffm_price__required_read(const struct ffm_node_model *nm, const struct ffm_price_call *c,
			     uint32_t every_n, struct ffm_price *out)
{
	int err;

	if (!out)
		return -EINVAL;
	if (every_n < 2) {
		memset(out, 0, sizeof(*out));
		return bad(out, -EINVAL, "every_n");
	}
	err = ffm_price__delete(nm, c, out);
	if (err)
		return err;
	/* Reading every N-th time deletes all reads but one in N. */
	scale(out, 1.0 - 1.0 / (double)every_n);
	out->conditional_ns = sum(out);
	out->every_n = every_n;
	out->saved_ns = 0;
	return 0;
}

int ffm_price__conditional_text(char *buf, size_t len, const char *use_line,
				const struct ffm_price *p)
{
	int n;

	if (!buf || !len || !p || p->every_n < 2)
		return -EINVAL;
	n = snprintf(buf, len, "if the value used at %s can wait, reading it every %u iterations "
			       "saves %.3f s",
		     use_line && use_line[0] ? use_line : "(unknown line)", p->every_n,
		     p->conditional_ns / 1e9);
	return n < 0 || (size_t)n >= len ? -ENOSPC : 0;
}
