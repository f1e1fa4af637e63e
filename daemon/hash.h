/* SPDX-License-Identifier: MIT */
/*
 * The content hash of stage 3 in user space: the same function the BPF side computes over the
 * bytes of a transfer (bpf/ffm_hash.h defines it), here over a buffer or a stream of pieces of
 * any size. Used to verify the BPF side in tests and by anything that hashes in the daemon.
 */
#ifndef FFM_DAEMON_HASH_H
#define FFM_DAEMON_HASH_H

#include <stddef.h>
#include <stdint.h>

#include "bpf/ffm_hash.h"

/* Streaming state: pieces of any length, in order. */
struct ffm_hasher {
	struct ffm_hash_state s;
	uint64_t len;
	uint8_t tail[FFM_HASH_BLOCK]; /* bytes of an incomplete block */
	uint32_t ntail;
};

void ffm_hasher__init(struct ffm_hasher *h);
void ffm_hasher__update(struct ffm_hasher *h, const void *p, size_t n);
uint64_t ffm_hasher__final(const struct ffm_hasher *h);

/* The hash of n bytes at p (== init, update(p, n), final). */
uint64_t ffm_hash64(const void *p, size_t n);

#endif
