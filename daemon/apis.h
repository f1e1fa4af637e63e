/* SPDX-License-Identifier: MIT */
/*
 * The driver API entry points ffm probes, with where their interesting arguments are.
 *
 * The table lists base names; every exported variant of a base name is probed: versioned
 * (`_v2`, `_v3`, ...) and per-thread default stream (`_ptds`, `_ptsz`) ones, e.g.
 * cuMemcpyHtoD -> cuMemcpyHtoD, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds. The CUDA runtime calls
 * the versioned entry points it gets from cuGetProcAddress_v2, so probing the plain exported
 * name alone would miss its calls (docs/DESIGN.md, "Facts measured on the real GPU machine").
 *
 * An API id is an index into the table; ids past the table are given at run time to
 * synchronizing functions that stage 1 found and the table does not know (ffm_apis__intern).
 */
#ifndef FFM_DAEMON_APIS_H
#define FFM_DAEMON_APIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bpf/ffm.h"

struct ffm_api_desc {
	const char *name;  /* base name */
	uint8_t kind;      /* enum ffm_api_kind */
	uint8_t dir;       /* enum ffm_rec_dir */
	uint8_t bytes_arg; /* 1..6, 0 = none */
	uint8_t dst_arg;
	uint8_t src_arg;
	uint8_t stream_arg;
	uint8_t elsz;      /* memset element size */
	uint8_t outp_arg;  /* allocation out pointer */
};

#define FFM_API_MAX 1024
#define FFM_API_WAIT 0 /* id 0 is the internal wait function */

struct ffm_apis;

int ffm_apis__new(struct ffm_apis **ret);
struct ffm_apis *ffm_apis__free(struct ffm_apis *a);
size_t ffm_apis__count(const struct ffm_apis *a);
const struct ffm_api_desc *ffm_apis__get(const struct ffm_apis *a, uint32_t id);
/* The id of base name @name, adding it (kind OTHER, no arguments) when unknown; -errno. */
int ffm_apis__intern(struct ffm_apis *a, const char *name, uint8_t kind);
/* The attach cookie of api @id (bpf/ffm.h, FFM_COOKIE). */
uint64_t ffm_apis__cookie(const struct ffm_apis *a, uint32_t id);
/* Strip `_vN`, `_ptds`, `_ptsz` suffixes: "cuMemcpyHtoDAsync_v2_ptsz" -> "cuMemcpyHtoDAsync". */
void ffm_api_base_name(const char *name, char *buf, size_t len);
/* Whether @name (any variant) is a query: a getter (cu...Get...), an occupancy calculator
 * (cuOccupancy*) or a ...Query. Such calls carry no transfer and do not wait for the
 * application's GPU work; a wait inside one is the driver's own (lazy loading of a module at
 * its first call), which the wait probe records at every stage. Stages 2-4 do not probe them
 * (ffm_probe_set__build), though stage 1 lists them: PyTorch calls cuKernelGetFunction and
 * cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags thousands of times a run. */
bool ffm_api_is_query(const char *name);

#endif
