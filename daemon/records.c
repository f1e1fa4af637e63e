/* SPDX-License-Identifier: MIT */
/* Which part handles which record type (daemon/records.h): one row a type. */
#include "daemon/records.h"

#define K(type, s, c, st) [type] = { .size = sizeof(struct s), .core = (c), .store = (st) }

static const struct ffm_rec_kind KINDS[] = {
	K(FFM_REC_WAIT, ffm_rec_wait, FFM_CORE_WAIT, FFM_STORE_WAIT),
	K(FFM_REC_CALL, ffm_rec_call, FFM_CORE_RUN, FFM_STORE_CALL),
	K(FFM_REC_STACK, ffm_rec_stack, FFM_CORE_RUN, FFM_STORE_STACK),
	K(FFM_REC_EXEC, ffm_rec_proc, FFM_CORE_EXEC, FFM_STORE_PROC),
	K(FFM_REC_FORK, ffm_rec_proc, FFM_CORE_FORK, FFM_STORE_PROC),
	K(FFM_REC_EXIT, ffm_rec_proc, FFM_CORE_EXIT, FFM_STORE_PROC),
	K(FFM_REC_RELEASE, ffm_rec_proc, FFM_CORE_SAMPLER, FFM_STORE_NONE),
	K(FFM_REC_XFER, ffm_rec_xfer, FFM_CORE_RUN, FFM_STORE_XFER),
	K(FFM_REC_RANGE, ffm_rec_range, FFM_CORE_RUN, FFM_STORE_RANGE),
	K(FFM_REC_HIT, ffm_rec_hit, FFM_CORE_RUN, FFM_STORE_HIT),
	K(FFM_REC_FAULT, ffm_rec_fault, FFM_CORE_RUN, FFM_STORE_FAULT),
	K(FFM_REC_MAP, ffm_rec_map, FFM_CORE_DRIVER, FFM_STORE_NONE),
	K(FFM_REC_SAMPLE, ffm_rec_sample, FFM_CORE_RUN, FFM_STORE_SAMPLE),
	K(FFM_REC_PYCODE, ffm_rec_pycode, FFM_CORE_RUN, FFM_STORE_PYCODE),
	K(FFM_REC_FUNC, ffm_rec_func, FFM_CORE_RUN, FFM_STORE_FUNC),
};

const struct ffm_rec_kind *ffm_rec_kind(uint32_t type)
{
	if (type >= sizeof(KINDS) / sizeof(KINDS[0]) || !KINDS[type].size)
		return NULL;
	return &KINDS[type];
}
