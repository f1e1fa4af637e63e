/* SPDX-License-Identifier: MIT */
/*
 * Pass "CPU samples". In: the store, the timeline run, opts.py_library. Out: struct an_cpu,
 * the CPU time sampled under each Python anchor outside driver calls.
 *
 * The CPU time a Python line's library call spends around its driver calls, from the CPU
 * samples of the stage-2 run (table cpu_samples; bpf/ffm.bpf.c cpu_sample).
 *
 * A host read in Python (`loss.item()`, `t.cpu()`, `print(t)`) is a library call of the user's
 * line: PyTorch dispatches, allocates, copies, waits and converts. The driver probes see the
 * copy and the wait; the framework's own work around them (30-100 us a call on the H100) they
 * do not, and the fix (read every N iterations) deletes it with the read. A CPU sample names
 * the Python frames the thread was running: those under the same user frame (the first frame
 * outside the installed libraries, at the same line, with the same callers) and outside any
 * probed driver call are that work. Their sum over the run, divided by the site's reads,
 * is what each removed read takes with it (analysis/events.c removed_cpu).
 *
 * The unit is the line: two library calls on one line (`model(x).sum().item()`) share it, so
 * the forward pass's own CPU time would count as the read's. Python frames in the store are
 * (file, function, line), not instructions: the same limit as the sites' names.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

void an_py_anchor_frame(struct an_py_anchor *p, const struct ffm_store_frame *f,
			const char *const *py_library)
{
	if (!ffm_an_py_frame(f))
		return;
	if (!p->on && ffm_an_py_library(f->file, py_library))
		return; /* library code above the user's frame: not part of the anchor */
	p->on = true;
	p->h = ffm_fnv1a(p->h ? p->h : FFM_FNV1A_INIT, &f->offset, sizeof(f->offset));
}

static int on_anchor_frame(const struct ffm_store_frame *f, uint32_t depth, void *ctx)
{
	struct an_py_anchor *p = ctx;

	(void)depth;
	an_py_anchor_frame(p, f, p->py_library);
	return 0;
}

struct cpu_scan {
	struct ffm_store *s;
	const char *const *py_library;
	struct an_cpu *out;
};

static int on_cpu_row(const struct ffm_store_cpu_samples *x, void *ctx)
{
	struct cpu_scan *cs = ctx;
	struct an_cpu *c = cs->out;
	struct an_py_anchor p = { .py_library = cs->py_library };
	uint32_t i;
	int err;

	if (x->state != 0)
		return 0; /* inside a driver call or its wait: the events time them */
	err = ffm_store__for_each_frame(cs->s, x->stack, on_anchor_frame, &p);
	if (err == -ENOENT || !p.h)
		return 0;
	if (err < 0)
		return err;
	i = oatab_get_u32(&c->of, p.h);
	if (i == UINT32_MAX) {
		if (ffm_grow((void **)&c->ns, &c->cap, c->n + 1, sizeof(*c->ns)) ||
		    oatab_put_u32(&c->of, p.h, (uint32_t)c->n))
			return -ENOMEM;
		i = (uint32_t)c->n++;
		c->ns[i] = 0;
	}
	c->ns[i] += x->ns;
	return 0;
}

int an_load_cpu_samples(struct ffm_store *s, const char *const *py_library, int64_t run,
			struct an_cpu *out)
{
	struct cpu_scan cs = { .s = s, .py_library = py_library, .out = out };
	int err;

	if (!run)
		return 0;
	err = ffm_store__for_each_cpu_samples(s, run, on_cpu_row, &cs);
	return err > 0 ? -EIO : err;
}

uint64_t an_cpu_at(const struct an_cpu *c, uint64_t anchor)
{
	uint32_t i = anchor ? oatab_get_u32(&c->of, anchor) : UINT32_MAX;

	return i == UINT32_MAX ? 0 : c->ns[i];
}

void an_cpu_fini(struct an_cpu *c)
{
	free(c->ns);
	oatab_free(&c->of);
}
