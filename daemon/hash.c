/* SPDX-License-Identifier: MIT */
#include <string.h>

#include "daemon/hash.h"

static inline uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v)); /* one unaligned load on x86; little-endian as in BPF */
	return v;
}

/* Whole blocks; returns the bytes consumed. Four lanes, no dependency between them. */
static size_t blocks(struct ffm_hash_state *s, const uint8_t *p, size_t n)
{
	uint64_t v0 = s->v0, v1 = s->v1, v2 = s->v2, v3 = s->v3;
	size_t done = 0;

	for (; n - done >= FFM_HASH_BLOCK; done += FFM_HASH_BLOCK) {
		v0 = ffm_hash_round(v0, load64(p + done));
		v1 = ffm_hash_round(v1, load64(p + done + 8));
		v2 = ffm_hash_round(v2, load64(p + done + 16));
		v3 = ffm_hash_round(v3, load64(p + done + 24));
	}
	s->v0 = v0;
	s->v1 = v1;
	s->v2 = v2;
	s->v3 = v3;
	return done;
}

void ffm_hasher__init(struct ffm_hasher *h)
{
	ffm_hash_init(&h->s);
	h->len = 0;
	h->ntail = 0;
}

void ffm_hasher__update(struct ffm_hasher *h, const void *vp, size_t n)
{
	const uint8_t *p = vp;

	h->len += n;
	if (h->ntail) {
		size_t take = FFM_HASH_BLOCK - h->ntail;

		if (take > n)
			take = n;
		memcpy(h->tail + h->ntail, p, take);
		h->ntail += take;
		p += take;
		n -= take;
		if (h->ntail < FFM_HASH_BLOCK)
			return;
		blocks(&h->s, h->tail, FFM_HASH_BLOCK);
		h->ntail = 0;
	}
	size_t done = blocks(&h->s, p, n);

	memcpy(h->tail, p + done, n - done);
	h->ntail = n - done;
}

uint64_t ffm_hasher__final(const struct ffm_hasher *h)
{
	struct ffm_hash_state s = h->s;

	if (h->ntail) {
		uint8_t last[FFM_HASH_BLOCK] = { 0 }; /* zero padding, as the BPF side does */

		memcpy(last, h->tail, h->ntail);
		blocks(&s, last, FFM_HASH_BLOCK);
	}
	return ffm_hash_final(&s, h->len);
}

uint64_t ffm_hash64(const void *p, size_t n)
{
	struct ffm_hasher h;

	ffm_hasher__init(&h);
	ffm_hasher__update(&h, p, n);
	return ffm_hasher__final(&h);
}
