/* SPDX-License-Identifier: MIT */
/* Small helpers of the analysis (analysis_int.h). */

#include <errno.h>

#include "analysis/analysis_int.h"

const char *an_pool_dup(struct strpool *p, const char *s, const char *dflt)
{
	char *d;

	if (!s || !*s)
		return dflt;
	if (ffm_grow((void **)&p->v, &p->cap, p->n + 1, sizeof(*p->v)))
		return NULL;
	d = strdup(s);
	if (!d)
		return NULL;
	p->v[p->n++] = d;
	return d;
}

void an_pool_fini(struct strpool *p)
{
	for (size_t i = 0; i < p->n; i++)
		free(p->v[i]);
	free(p->v);
}

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

int an_i64s_push(struct an_i64s *s, int64_t x)
{
	if (ffm_grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v)))
		return -ENOMEM;
	s->v[s->n++] = x;
	return 0;
}

int64_t an_median_i64(int64_t *v, size_t n)
{
	if (!n)
		return -1;
	qsort(v, n, sizeof(*v), cmp_i64);
	return v[n / 2];
}

int64_t an_trimmed_mean_i64(int64_t *v, size_t n)
{
	size_t cut = n / 100;
	__int128 sum = 0;

	if (!n)
		return -1;
	qsort(v, n, sizeof(*v), cmp_i64);
	for (size_t i = cut; i < n - cut; i++)
		sum += v[i];
	return (int64_t)(sum / (__int128)(n - 2 * cut));
}

struct ffm_an_proc *an_proc_of(struct ffm_analysis_result *res, uint32_t tgid)
{
	/* The latest process of that tgid (a tgid may be reused within a run). */
	for (size_t i = res->n_procs; i-- > 0;)
		if (res->procs[i].tgid == tgid)
			return &res->procs[i];
	return NULL;
}
