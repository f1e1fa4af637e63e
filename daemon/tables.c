/* SPDX-License-Identifier: MIT */
/*
 * Lookups in ffmd's tables (struct ffmd, daemon/ffmd_int.h): a job by id, by process or by
 * record, a driver by file, a process's probes, the rule that owns a slot, whether any job
 * needs probes; and the route table, which sends the records of a process a rule matched to
 * its job until BPF has moved the process there (see record_job in server.c).
 *
 * The lowest floor of the core but for procfs.c: every other file looks things up here, and
 * nothing here calls into them, so no two of them need each other for a lookup. Nothing here
 * reads /proc or changes a job, a driver or a hold.
 */
#include <string.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"
#include "store/ffm_store.h"

struct drv *driver_find(struct ffmd *d, uint64_t dev, uint64_t ino)
{
	for (int i = 0; i < MAX_DRIVERS; i++)
		if (d->drvs[i].used && d->drvs[i].dev == dev && d->drvs[i].ino == ino)
			return &d->drvs[i];
	return NULL;
}

struct job *job_find(struct ffmd *d, const char *id)
{
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used && !strcmp(d->jobs[i].id, id))
			return &d->jobs[i];
	return NULL;
}

/* The job @pid belongs to (index in jobs[]); -1: tracked, in a rule's slot, not yet adopted;
 * -2: not tracked. */
int job_of_pid(struct ffmd *d, pid_t pid)
{
	int slot = ffm_collector__pid_slot(d->col, pid), j;

	if (slot < 0 || slot >= FFM_MAX_JOBS)
		return -2;
	if (d->jobs[slot].used)
		return slot;
	if (!rule_of_slot(d, (uint32_t)slot))
		return -2;
	j = route_find(d, (uint32_t)pid);
	return j >= 0 && d->jobs[j].used ? j : -1;
}

/* The job a record of a process belongs to, without moving anything (see record_job). */
int job_of_rec(struct ffmd *d, const struct ffm_rec_hdr *h)
{
	int j;

	if (h->job < FFM_MAX_JOBS && d->jobs[h->job].used)
		return (int)h->job;
	j = route_find(d, h->tgid);
	return j >= 0 && d->jobs[j].used ? j : -1;
}

struct rule *rule_of_slot(struct ffmd *d, uint32_t slot)
{
	if (slot >= FFM_MAX_JOBS || !(d->rule_slots & (1ull << slot)))
		return NULL;
	for (int i = 0; i < FFM_MAX_RULES; i++)
		if (d->rules[i].used && d->rules[i].slot == slot)
			return &d->rules[i];
	return NULL;
}

struct plink *plink_find(struct ffmd *d, pid_t pid, const struct drv *dv)
{
	for (int i = 0; i < MAX_PLINKS; i++)
		if (d->plinks[i].pid == pid && d->plinks[i].dv == dv)
			return &d->plinks[i];
	return NULL;
}

/* Probes are needed while a job is active or a rule could make one. */
bool any_job(const struct ffmd *d)
{
	if (d->rule_slots)
		return true;
	for (int i = 0; i < FFM_MAX_JOBS; i++)
		if (d->jobs[i].used)
			return true;
	return false;
}

/* Routes by tgid in an oatab (common/oatab.h: no deletion): a dropped route keeps its entry
 * with ROUTE_DROPPED until the table is rebuilt with its live routes only. */
#define ROUTE_DROPPED (UINT32_MAX - 1)

int routes_init(struct ffmd *d)
{
	d->routes = (struct routes){ .t = OATAB_U32_INIT };
	return oatab_reserve(&d->routes.t, 64);
}

void routes_free(struct ffmd *d)
{
	oatab_free(&d->routes.t);
	d->routes.live = 0;
}

int route_find(const struct ffmd *d, uint32_t tgid)
{
	uint32_t j = oatab_get_u32(&d->routes.t, tgid);

	return j < FFM_MAX_JOBS ? (int)j : -1;
}

void route_add(struct ffmd *d, uint32_t tgid, int job)
{
	uint32_t was = oatab_get_u32(&d->routes.t, tgid);

	if (was < FFM_MAX_JOBS) {
		oatab_put_u32(&d->routes.t, tgid, (uint32_t)job); /* an entry's value: no insert */
		return;
	}
	/* Only records written before a move use routes, so a full table loses those of
	 * the newest processes; say so rather than misfile them. */
	if (d->routes.live >= MAX_ROUTES || oatab_put_u32(&d->routes.t, tgid, (uint32_t)job) < 0) {
		log_warn("more than %d processes waiting to be moved to their jobs; records of %u "
			 "before the move are dropped", MAX_ROUTES, tgid);
		return;
	}
	d->routes.live++;
}

/* A table of the live routes only, once dropped ones outnumber them (a failed rebuild keeps the
 * old table: lookups stay right, it only stays larger). */
static void routes_compact(struct ffmd *d)
{
	struct routes nr = { .t = OATAB_U32_INIT };

	if (d->routes.t.n <= 2 * (size_t)d->routes.live + 64)
		return;
	for (size_t i = 0; i < d->routes.t.cap; i++) {
		const struct oa_u32 *e = oatab_slot(&d->routes.t, i);

		if (!e || e->v >= FFM_MAX_JOBS)
			continue;
		if (oatab_put_u32(&nr.t, e->k.a, e->v) < 0) {
			oatab_free(&nr.t);
			return;
		}
		nr.live++;
	}
	oatab_free(&d->routes.t);
	d->routes = nr;
}

void routes_drop_job(struct ffmd *d, int job)
{
	for (size_t i = 0; i < d->routes.t.cap; i++) {
		struct oa_u32 *e = oatab_slot(&d->routes.t, i);

		if (e && e->v == (uint32_t)job) {
			e->v = ROUTE_DROPPED;
			d->routes.live--;
		}
	}
	routes_compact(d);
}

struct ffm_overhead *job_overhead(struct ffmd *d, int job)
{
	return job >= 0 && job < FFM_MAX_JOBS && d->jobs[job].used && d->jobs[job].jr ?
		       ffm_jobrun__overhead(d->jobs[job].jr) : NULL;
}

void overhead_charge(struct ffmd *d, pid_t pid, int part, uint64_t ns)
{
	ffm_overhead_add(job_overhead(d, job_of_pid(d, pid)), part, ns);
}
