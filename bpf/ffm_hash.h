/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * ffm's hash functions, every one of them, in one place: the content hash of transferred bytes
 * (stage 3), FNV-1a and the 64-bit mixers. Header-only (static inline over plain __u64), so that
 * the BPF side (bpf/ffm.bpf.c) and user space compile the same definitions where both must
 * agree: the content hash, and FNV-1a of a process's argument block (a job key input).
 *
 * Values that are stored on disk or compared across runs come from these functions: job keys
 * (daemon/jobrun.c), API ids and stack keys (daemon/recorder.c), call-site identities
 * (analysis/), key file names (store/). Changing one changes every existing store's meaning:
 * tests/common/test_hash.c pins them to fixed values.
 *
 * Content hash: 4 lanes of multiply-rotate over 32-byte blocks (the xxHash64 primes), the last
 * block zero-padded, the exact length mixed in; not xxHash64's values, not cryptographic
 * (docs/STAGES.md, "The hash", says why each).
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

/* ---- FNV-1a (64 and 32 bits) ------------------------------------------------------------ */

#define FFM_FNV1A_INIT 0xcbf29ce484222325ULL
#define FFM_FNV1A_PRIME 0x100000001b3ULL
#define FFM_FNV1A32_INIT 2166136261u
#define FFM_FNV1A32_PRIME 16777619u

static inline __u64 ffm_fnv1a_byte(__u64 h, unsigned char c)
{
	return (h ^ c) * FFM_FNV1A_PRIME;
}

/* @n bytes at @p into @h (start with FFM_FNV1A_INIT; chain calls with the previous result). */
static inline __u64 ffm_fnv1a(__u64 h, const void *p, __u64 n)
{
	const unsigned char *b = (const unsigned char *)p;

	for (__u64 i = 0; i < n; i++)
		h = ffm_fnv1a_byte(h, b[i]);
	return h;
}

static inline __u32 ffm_fnv1a32_byte(__u32 h, unsigned char c)
{
	return (h ^ c) * FFM_FNV1A32_PRIME;
}

/* ---- 64-bit mixers ----------------------------------------------------------------------- */

#define FFM_GOLDEN64 0x9e3779b97f4a7c15ULL /* 2^64 / golden ratio */

/* MurmurHash3's fmix64 finalizer: every input bit flips each output bit with probability ~1/2. */
static inline __u64 ffm_mix64(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ULL;
	x ^= x >> 33;
	return x;
}

/* fmix64's first half: enough to spread a table index, and what stack keys (stored) are made
 * with: never change it. */
static inline __u64 ffm_mix64_half(__u64 x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

/* Two words into one table hash (common/oatab.c). */
static inline __u64 ffm_hash_pair(__u64 a, __u64 b)
{
	return ffm_mix64_half(a ^ (b * FFM_GOLDEN64));
}

#endif /* FFM_HASH_H */
