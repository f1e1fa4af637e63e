/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/util.h"
#include "daemon/apis.h"
#include "daemon/probes.h"
#include "stages/ffm_plan.h"
#include "symbols/ffm_driver.h"

static int push(struct ffm_probe_set *ps, const struct ffm_probe *p)
{
	for (size_t i = 0; i < ps->n; i++)
		if (ps->p[i].offset == p->offset)
			return 0; /* two names for one entry (aliases): probe it once */
	if (FFM_GROW(ps->p, ps->cap, ps->n + 1))
		return -ENOMEM;
	ps->p[ps->n++] = *p;
	return 1;
}

/* The plan's probe class of an API table entry's kind (0: none). */
static const uint32_t kind_probe[FFM_KIND_OTHER + 1] = {
	[FFM_KIND_SYNC] = FFM_PROBE_SYNC_STATIC, [FFM_KIND_MEMCPY] = FFM_PROBE_TRANSFER,
	[FFM_KIND_ALLOC] = FFM_PROBE_ALLOC,	 [FFM_KIND_FREE] = FFM_PROBE_FREE,
	[FFM_KIND_MEMSET] = FFM_PROBE_MEMSET,	 [FFM_KIND_LAUNCH] = FFM_PROBE_LAUNCH,
};

static int add_api(struct ffm_probe_set *ps, const struct ffm_driver *d, struct ffm_apis *apis,
		   uint32_t id)
{
	const struct ffm_api_desc *desc = ffm_apis__get(apis, id);
	struct ffm_driver_sym syms[16];
	int n, added = 0;

	if (!desc)
		return -EINVAL;
	n = ffm_driver__variants(d, desc->name, syms, 16);
	if (n < 0)
		return n == -ENOENT ? 0 : n;
	for (int i = 0; i < n && i < 16; i++) {
		struct ffm_probe p = { .offset = syms[i].offset, .cookie = ffm_apis__cookie(apis, id) };
		int err = push(ps, &p);

		if (err < 0)
			return err;
		added += err;
	}
	if (added)
		ps->napis++;
	return 0;
}

/* The entry points that release a context: every variant, entry only. */
static int add_releases(struct ffm_probe_set *ps, const struct ffm_driver *d)
{
	static const char *const names[] = { "cuDevicePrimaryCtxRelease", "cuDevicePrimaryCtxReset",
					     "cuCtxDestroy" };
	struct ffm_driver_sym syms[16];

	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		int n = ffm_driver__variants(d, names[k], syms, 16);

		if (n == -ENOENT)
			continue;
		if (n < 0)
			return n;
		for (int i = 0; i < n && i < 16; i++) {
			struct ffm_probe p = { .offset = syms[i].offset, .release = true };
			int err = push(ps, &p);

			if (err < 0)
				return err;
		}
	}
	return 0;
}

int ffm_probe_set__build(struct ffm_probe_set *ps, const struct ffm_driver *d,
			 struct ffm_apis *apis, uint32_t probes, uint64_t wait_off,
			 const char *const *sync_names, size_t nsync)
{
	int err;

	memset(ps, 0, sizeof(*ps));
	if ((probes & FFM_PROBE_WAIT) && wait_off) {
		struct ffm_probe p = {
			.offset = wait_off, .wait = true,
			.cookie = FFM_COOKIE(FFM_API_WAIT, FFM_KIND_WAIT, 0, 0, 0, 0, 0, 0, 0),
		};

		err = push(ps, &p);
		if (err < 0)
			goto fail;
	}
	if (probes & FFM_PROBE_CTX_END) {
		err = add_releases(ps, d);
		if (err < 0)
			goto fail;
	}
	/* The stage-1 list: what this job's runs really waited in. */
	if (probes & FFM_PROBE_SYNC_FUNCS) {
		for (size_t i = 0; i < nsync; i++) {
			int id;

			/* Queries and getters: their waits are the driver's own, recorded by the
			 * wait probe; a probe pair on each call would cost a job's process about
			 * a microsecond per call for nothing the analysis uses. */
			if (!(probes & FFM_PROBE_SYNC_QUERIES) && ffm_api_is_query(sync_names[i]))
				continue;
			id = ffm_apis__intern(apis, sync_names[i], FFM_KIND_SYNC);

			if (id < 0) {
				err = id;
				goto fail;
			}
			err = add_api(ps, d, apis, id);
			if (err < 0)
				goto fail;
		}
	}
	for (size_t id = 1; id < ffm_apis__count(apis); id++) {
		const struct ffm_api_desc *desc = ffm_apis__get(apis, id);
		uint32_t need = desc->kind <= FFM_KIND_OTHER ? kind_probe[desc->kind] :
				desc->kind == FFM_KIND_NAME ? FFM_PROBE_LAUNCH : 0;

		/* Explicit syncs are also probed from the static table when stage 1 gave its
		 * list: an explicit sync whose GPU work was already done never waits, so stage
		 * 1 cannot see it, yet stage 2 must time it. */
		if (need == FFM_PROBE_SYNC_STATIC && (probes & FFM_PROBE_SYNC_FUNCS))
			need = FFM_PROBE_SYNC_FUNCS;
		if (!need || !(probes & need))
			continue;
		err = add_api(ps, d, apis, id);
		if (err < 0)
			goto fail;
	}
	/* Stage 3 hashes in sleepable twins of the API probes: every API point gets them, since a
	 * synchronization anywhere completes the async DtoH copies whose bytes are hashed then. */
	if (probes & FFM_PROBE_HASH)
		for (size_t i = 0; i < ps->n; i++)
			ps->p[i].hash = !ps->p[i].wait;
	return 0;
fail:
	ffm_probe_set__release(ps);
	return err;
}

void ffm_probe_set__release(struct ffm_probe_set *ps)
{
	free(ps->p);
	memset(ps, 0, sizeof(*ps));
}
