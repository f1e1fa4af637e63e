/* SPDX-License-Identifier: MIT */
/*
 * sequence: state shared by seq_main.c and seq_helpers.c. The workload is split over two source
 * files on purpose: its problems form one sequence (in the paper's sense) that crosses functions
 * and files, which ffm must group into one "sequence" entry with every call site named.
 */
#ifndef FFM_WL_SEQ_H
#define FFM_WL_SEQ_H

#include "wl.h"

struct seq {
	CUdeviceptr buf;	/* main result, n words */
	CUdeviceptr tmp;	/* scratch, allocated once in --fixed mode, per iteration otherwise */
	uint32_t *host;		/* copy of buf: pinned in --fixed mode, malloc()ed otherwise */
	long long n, scratch;
	long long scratch_us, cpu2_us;
};

/* Copies buf to host, runs the scratch kernel and cpu2_us of CPU work (seq_helpers.c). */
void seq_fetch_and_scratch(struct wl *w, struct seq *s, unsigned int i);

#endif
