/* SPDX-License-Identifier: MIT */
/*
 * Which probes a stage puts on one driver file: the plan's probe classes (stages/ffm_plan.h)
 * turned into file offsets and cookies. Every exported variant of a table entry is probed.
 */
#ifndef FFM_PROBES_H
#define FFM_PROBES_H

#include <stddef.h>
#include <stdint.h>

#include "daemon/collector.h"

struct ffm_driver;
struct ffm_apis;

struct ffm_probe_set {
	size_t n, cap;
	struct ffm_probe *p;
	uint32_t napis; /* distinct API table entries with at least one variant probed */
};

/*
 * Build the probe set for plan probe flags @probes (FFM_PROBE_*) on driver @d whose verified
 * wait function entry is at file offset @wait_off (0: no wait probe). @sync_names: the public
 * functions stage 1 saw waiting (may be NULL/0), interned into @apis as synchronizing.
 */
int ffm_probe_set__build(struct ffm_probe_set *ps, const struct ffm_driver *d,
			 struct ffm_apis *apis, uint32_t probes, uint64_t wait_off,
			 const char *const *sync_names, size_t nsync);
void ffm_probe_set__release(struct ffm_probe_set *ps);

#endif
