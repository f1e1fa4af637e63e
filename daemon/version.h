/* SPDX-License-Identifier: MIT */
/*
 * What `ffmd --version` and `ffmctl --version` print: ffm's release (the Makefile's VERSION)
 * and the versions two of its parts must share to work together: the store's schema (a newer
 * store is refused by an older ffmctl), the control protocol (ffmctl <-> ffmd) and the BPF ABI
 * (the records bpf/ffm.h defines).
 */
#ifndef FFM_VERSION_H
#define FFM_VERSION_H

#include <stdio.h>

#include "bpf/ffm.h"
#include "daemon/proto.h"
#include "store/ffm_store.h"

#ifndef FFM_VERSION
#define FFM_VERSION "unknown"
#endif

static inline void ffm_print_version(FILE *f, const char *prog)
{
	fprintf(f, "%s %s (store schema %d, control protocol %d, BPF ABI %d)\n", prog, FFM_VERSION,
		FFM_STORE_SCHEMA_VERSION, FFM_PROTO_VERSION, FFM_ABI_VERSION);
}

#endif
