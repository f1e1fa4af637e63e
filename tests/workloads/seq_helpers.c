/* SPDX-License-Identifier: MIT */
/*
 * sequence, second half: the helper an application would call to start the copy of its result
 * and to run a step that needs scratch memory. In plain mode both of its driver calls wait:
 * the copy into pageable memory waits for the main kernel and the copy, the free of the scratch
 * buffer waits for the scratch kernel; the CPU work after them overlaps nothing.
 */
#include "seq.h"

WL_NOINLINE void seq_fetch_and_scratch(struct wl *w, struct seq *s, unsigned int i)
{
	CUdeviceptr tmp = s->tmp;

	CK(cuMemcpyDtoHAsync(s->host, s->buf, s->n * 4, 0)); /* FFM-PLANT: sequence pageable-copy */
	if (!w->fixed)
		CK(cuMemAlloc(&tmp, s->scratch * 4 + 4)); /* FFM-PLANT: sequence temp-buffer */
	wl_work(w, 0, tmp, s->scratch, 0, i, s->scratch_us * 1000);
	if (!w->fixed)
		CK(cuMemFree(tmp)); /* FFM-PLANT: sequence free-sync */
	wl_cpu_work(s->cpu2_us * 1000);
}
