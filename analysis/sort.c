/* SPDX-License-Identifier: MIT */
/*
 * Pass "sort" (analysis/analysis.c runs the passes): the groups by benefit, the sites by time
 * (their references renumbered), the driver functions by time waited, the event verdicts by
 * (run, event) for lookups. In and out: res's groups, sites and apis, the stack -> site map
 * (made anew), the event verdicts; the api map is freed.
 */
#include <errno.h>

#include "analysis/analysis_int.h"

static int cmp_group(const void *x, const void *y)
{
	const struct ffm_an_group *a = x, *b = y;

	if (a->conditional != b->conditional) /* conditional reads after the problems that count */
		return a->conditional ? 1 : -1;
	if (a->benefit_ns != b->benefit_ns)
		return a->benefit_ns < b->benefit_ns ? 1 : -1;
	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

static int cmp_site(const void *x, const void *y)
{
	const struct ffm_an_site *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return a->key < b->key ? -1 : a->key > b->key;
}

int an_cmp_api(const void *x, const void *y)
{
	const struct ffm_an_api *a = x, *b = y;

	if (a->wait_ns != b->wait_ns)
		return a->wait_ns < b->wait_ns ? 1 : -1;
	if (a->dur_ns != b->dur_ns)
		return a->dur_ns < b->dur_ns ? 1 : -1;
	return strcmp(a->name, b->name);
}

static int cmp_site_idx(const void *x, const void *y, void *arg)
{
	const struct ffm_an_site *s = arg;
	uint32_t i = *(const uint32_t *)x, j = *(const uint32_t *)y;
	int c = cmp_site(&s[i], &s[j]);

	return c ? c : i < j ? -1 : i > j;
}

/* Sort the sites (by time) once every index into them has been handed out, and renumber the
 * references: groups, first transfers, the stack map. The internal per-site state (struct
 * site_int) is not needed after the scan and stays in the old order. */
static int sort_sites(struct ffm_analysis_result *res, struct oatab *site_of)
{
	size_t n = res->n_sites;
	struct ffm_an_site *tmp = NULL;
	uint32_t *perm = NULL, *inv = NULL;
	int err = 0;

	if (n < 2)
		return 0;
	tmp = malloc(n * sizeof(*tmp));
	perm = malloc(n * sizeof(*perm));
	inv = malloc(n * sizeof(*inv));
	if (!tmp || !perm || !inv) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < n; i++)
		perm[i] = (uint32_t)i;
	qsort_r(perm, n, sizeof(*perm), cmp_site_idx, res->sites);
	memcpy(tmp, res->sites, n * sizeof(*tmp));
	for (size_t i = 0; i < n; i++) {
		res->sites[i] = tmp[perm[i]];
		inv[perm[i]] = (uint32_t)i;
	}
	for (size_t i = 0; i < n; i++)
		if (res->sites[i].first_xfer_site >= 0)
			res->sites[i].first_xfer_site = (int)inv[res->sites[i].first_xfer_site];
	for (size_t i = 0; i < res->n_groups; i++) {
		struct ffm_an_group *gr = &res->groups[i];

		gr->site = inv[gr->site];
		for (uint32_t m = 0; m < gr->n_members; m++)
			gr->seq_sites[m] = inv[gr->seq_sites[m]];
	}
	oatab_free(site_of);
	for (size_t i = 0; i < n && !err; i++)
		err = oatab_put_u32(site_of, (uint64_t)res->sites[i].stack, (uint32_t)i);
out:
	free(tmp);
	free(perm);
	free(inv);
	return err;
}

int an_sort(struct ffm_analysis_result *res, struct oatab *site_of, struct oatab *api_of,
	    struct an_evvs *evv)
{
	int err;

	/* The subsequence lookup goes by pattern key, so the groups' order is free. */
	if (res->n_groups) /* NULL when there is no group: qsort(NULL, 0) is UB */
		qsort(res->groups, res->n_groups, sizeof(*res->groups), cmp_group);
	err = sort_sites(res, site_of);
	if (err)
		return err;
	if (res->n_apis) /* NULL when no run named an API */
		qsort(res->apis, res->n_apis, sizeof(*res->apis), an_cmp_api);
	oatab_free(api_of);
	return an_evv_sort(evv);
}
