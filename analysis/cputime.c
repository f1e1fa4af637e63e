/* SPDX-License-Identifier: MIT */
/*
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

static int on_cpu_row(const struct ffm_store_cpu_samples *x, void *ctx)
{
	struct ffm_analysis *a = ctx;
	struct an_py_anchor p = { .py_library = a->o.py_library };
	uint32_t i;
	int err;

	if (x->state != 0)
		return 0; /* inside a driver call or its wait: the events time them */
	err = ffm_store__for_each_frame(a->s, x->stack, on_anchor_frame, &p);
	if (err == -ENOENT || !p.h)
		return 0;
	if (err < 0)
		return err;
	i = oatab_get_u32(&a->cpu_of, p.h);
	if (i == UINT32_MAX) {
		if (ffm_grow((void **)&a->cpu, &a->cap_cpu, a->n_cpu + 1, sizeof(*a->cpu)) ||
		    oatab_put_u32(&a->cpu_of, p.h, (uint32_t)a->n_cpu))
			return -ENOMEM;
		i = (uint32_t)a->n_cpu++;
		a->cpu[i] = 0;
	}
	a->cpu[i] += x->ns;
	return 0;
}

int an_load_cpu_samples(struct ffm_analysis *a)
{
	int err;

	if (!a->res.run_timeline)
		return 0;
	err = ffm_store__for_each_cpu_samples(a->s, a->res.run_timeline, on_cpu_row, a);
	return err > 0 ? -EIO : err;
}

uint64_t an_cpu_at(const struct ffm_analysis *a, uint64_t anchor)
{
	uint32_t i = anchor ? oatab_get_u32(&a->cpu_of, anchor) : UINT32_MAX;

	return i == UINT32_MAX ? 0 : a->cpu[i];
}
