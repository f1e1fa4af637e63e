/* SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <string.h>

#include "daemon/oatab.h"

static uint64_t mix(uint64_t a, uint64_t b)
{
	uint64_t x = a ^ (b * 0x9e3779b97f4a7c15ULL);

	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdULL;
	x ^= x >> 33;
	return x;
}

static struct oa_key *at(const struct oatab *t, void *e, size_t i)
{
	return (struct oa_key *)((char *)e + i * t->esz);
}

static bool empty(const struct oa_key *k)
{
	return !k->a && !k->b;
}

static int grow(struct oatab *t)
{
	size_t ncap = t->cap ? t->cap * 2 : 64;
	void *n = calloc(ncap, t->esz);

	if (!n)
		return -1;
	for (size_t j = 0; j < t->cap; j++) {
		struct oa_key *k = at(t, t->e, j);
		size_t i;

		if (empty(k))
			continue;
		for (i = mix(k->a, k->b) & (ncap - 1); !empty(at(t, n, i)); i = (i + 1) & (ncap - 1))
			;
		memcpy(at(t, n, i), k, t->esz);
	}
	free(t->e);
	t->e = n;
	t->cap = ncap;
	return 0;
}

void *oatab_find(struct oatab *t, uint64_t a, uint64_t b, bool insert)
{
	struct oa_key *k;
	size_t i;

	if (!a && !b)
		return NULL;
	if (insert && (t->n + 1) * 2 > t->cap && grow(t) < 0)
		return NULL;
	if (!t->cap)
		return NULL;
	for (i = mix(a, b) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		k = at(t, t->e, i);
		if (empty(k))
			break;
		if (k->a == a && k->b == b)
			return k;
	}
	if (!insert)
		return NULL;
	memset(k, 0, t->esz);
	k->a = a;
	k->b = b;
	t->n++;
	return k;
}

void *oatab_slot(const struct oatab *t, size_t i)
{
	struct oa_key *k = i < t->cap ? at(t, t->e, i) : NULL;

	return k && !empty(k) ? k : NULL;
}

void oatab_free(struct oatab *t)
{
	free(t->e);
	t->e = NULL;
	t->n = t->cap = 0;
}
