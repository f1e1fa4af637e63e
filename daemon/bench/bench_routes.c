// SPDX-License-Identifier: MIT
/*
 * The route table's lookups (daemon/tables.c): records of processes a rule's slot holds until
 * BPF moves them to their job are routed by tgid, one lookup a record. Fills the table with
 * @routes processes, then times lookups of routed and of unknown tgids.
 *   build/bench/bench_routes [routes] [lookups]
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/util.h"
#include "daemon/ffmd_int.h"

int main(int argc, char **argv)
{
	unsigned routes = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 0) : 4000;
	unsigned long lookups = argc > 2 ? strtoul(argv[2], NULL, 0) : 10000000;
	struct ffmd *d = calloc(1, sizeof(*d));
	unsigned long hit = 0;
	uint64_t t0, t1, t2;

	if (!d || routes_init(d) < 0) {
		fprintf(stderr, "bench_routes: out of memory\n");
		return 1;
	}
	for (unsigned i = 0; i < routes; i++)
		route_add(d, 1000 + 7 * i, (int)(i % FFM_MAX_JOBS));
	t0 = ffm_now_ns();
	for (unsigned long i = 0; i < lookups; i++)
		hit += route_find(d, 1000 + 7 * (uint32_t)(i % routes)) >= 0;
	t1 = ffm_now_ns();
	for (unsigned long i = 0; i < lookups; i++)
		hit += route_find(d, 3 + 7 * (uint32_t)(i % routes)) >= 0;
	t2 = ffm_now_ns();
	printf("routes %u: routed %.1f ns a lookup (%.3g records/s), unknown %.1f ns (%lu hits)\n",
	       routes, (double)(t1 - t0) / (double)lookups, 1e9 * (double)lookups / (double)(t1 - t0),
	       (double)(t2 - t1) / (double)lookups, hit);
	routes_free(d);
	free(d);
	return 0;
}
