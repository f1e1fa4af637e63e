/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ffm's content hash of transferred bytes (stage 3), shared by the BPF side (bpf/ffm.bpf.c hashes
 * in a sleepable uprobe) and user space (daemon/hash.c, tests): both must give the same value for
 * the same bytes, so the one definition lives here as static inline functions over plain __u64.
 *
 * Shape: 4 independent lanes of multiply-rotate over 32-byte blocks (the lanes run in parallel
 * on an out-of-order core, which is what makes it fast), a message whose length is not a
 * multiple of 32 is zero-padded to the next block, and the finalizer folds the lanes, mixes in
 * the exact byte length (so padding never makes two lengths collide) and avalanches. The round
 * and finalizer constants are the well-studied 64-bit primes of xxHash64; the padding and the
 * lane merge are ours, so values are not xxHash64's. Not cryptographic: a transfer made equal on
 * purpose to another is not our threat model; an accidental 64-bit collision is.
 *
 * Streaming: feed whole 32-byte blocks with ffm_hash_block(), then ffm_hash_final(len) with the
 * total length; the caller zero-pads the last partial block. Little-endian word loads (x86).
 */
#ifndef FFM_HASH_H
#define FFM_HASH_H

#ifndef __VMLINUX_H__
#include <linux/types.h>
#endif

#define FFM_HASH_P1 0x9E3779B185EBCA87ULL
#define FFM_HASH_P2 0xC2B2AE3D27D4EB4FULL
#define FFM_HASH_P3 0x165667B19E3779F9ULL
#define FFM_HASH_P4 0x85EBCA77C2B2AE63ULL
#define FFM_HASH_SEED 0x66666d2d68617368ULL /* "ffm-hash" */
#define FFM_HASH_BLOCK 32

struct ffm_hash_state {
	__u64 v0, v1, v2, v3;
};

static inline __u64 ffm_hash_rotl(__u64 x, int r)
{
	return (x << r) | (x >> (64 - r));
}

static inline __u64 ffm_hash_round(__u64 acc, __u64 w)
{
	acc += w * FFM_HASH_P2;
	acc = ffm_hash_rotl(acc, 31);
	return acc * FFM_HASH_P1;
}

static inline void ffm_hash_init(struct ffm_hash_state *s)
{
	s->v0 = FFM_HASH_SEED + FFM_HASH_P1 + FFM_HASH_P2;
	s->v1 = FFM_HASH_SEED + FFM_HASH_P2;
	s->v2 = FFM_HASH_SEED;
	s->v3 = FFM_HASH_SEED - FFM_HASH_P1;
}

/* One 32-byte block given as four little-endian words. */
static inline void ffm_hash_block(struct ffm_hash_state *s, __u64 w0, __u64 w1, __u64 w2, __u64 w3)
{
	s->v0 = ffm_hash_round(s->v0, w0);
	s->v1 = ffm_hash_round(s->v1, w1);
	s->v2 = ffm_hash_round(s->v2, w2);
	s->v3 = ffm_hash_round(s->v3, w3);
}

static inline __u64 ffm_hash_merge(__u64 h, __u64 v)
{
	h ^= ffm_hash_round(0, v);
	return h * FFM_HASH_P1 + FFM_HASH_P4;
}

/* @len: total bytes hashed (before padding). */
static inline __u64 ffm_hash_final(const struct ffm_hash_state *s, __u64 len)
{
	__u64 h = ffm_hash_rotl(s->v0, 1) + ffm_hash_rotl(s->v1, 7) + ffm_hash_rotl(s->v2, 12) +
		  ffm_hash_rotl(s->v3, 18);

	h = ffm_hash_merge(h, s->v0);
	h = ffm_hash_merge(h, s->v1);
	h = ffm_hash_merge(h, s->v2);
	h = ffm_hash_merge(h, s->v3);
	h += len;
	h ^= h >> 33;
	h *= FFM_HASH_P2;
	h ^= h >> 29;
	h *= FFM_HASH_P3;
	h ^= h >> 32;
	return h;
}

#endif /* FFM_HASH_H */
