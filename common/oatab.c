/* SPDX-License-Identifier: MIT */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "bpf/ffm_hash.h"
#include "common/oatab.h"

static struct oa_key *at(const struct oatab *t, void *e, size_t i)
{
	return (struct oa_key *)((char *)e + i * t->esz);
}

static bool empty(const struct oa_key *k)
{
	return !k->a && !k->b;
}

static int resize(struct oatab *t, size_t ncap)
{
	void *n = calloc(ncap, t->esz);

	if (!n)
		return -ENOMEM;
	for (size_t j = 0; j < t->cap; j++) {
		struct oa_key *k = at(t, t->e, j);
		size_t i;

		if (empty(k))
			continue;
		for (i = ffm_hash_pair(k->a, k->b) & (ncap - 1); !empty(at(t, n, i));
		     i = (i + 1) & (ncap - 1))
			;
		memcpy(at(t, n, i), k, t->esz);
	}
	free(t->e);
	t->e = n;
	t->cap = ncap;
	return 0;
}

int oatab_reserve(struct oatab *t, size_t n)
{
	size_t ncap = t->cap ? t->cap : 64;

	while (n * 2 > ncap)
		ncap *= 2;
	return ncap == t->cap ? 0 : resize(t, ncap);
}

void *oatab_get(const struct oatab *t, uint64_t a, uint64_t b)
{
	if ((!a && !b) || !t->cap)
		return NULL;
	for (size_t i = ffm_hash_pair(a, b) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct oa_key *k = at(t, t->e, i);

		if (empty(k))
			return NULL;
		if (k->a == a && k->b == b)
			return k;
	}
}

void *oatab_find(struct oatab *t, uint64_t a, uint64_t b, bool insert)
{
	struct oa_key *k = oatab_get(t, a, b);
	size_t i;

	if (k || !insert || (!a && !b))
		return k;
	if ((t->n + 1) * 2 > t->cap && resize(t, t->cap ? t->cap * 2 : 64) < 0)
		return NULL;
	for (i = ffm_hash_pair(a, b) & (t->cap - 1); !empty(k = at(t, t->e, i));
	     i = (i + 1) & (t->cap - 1))
		;
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

uint32_t oatab_get_u32(const struct oatab *t, uint64_t key)
{
	const struct oa_u32 *e = oatab_get(t, key, 1);

	return e ? e->v : UINT32_MAX;
}

int oatab_put_u32(struct oatab *t, uint64_t key, uint32_t v)
{
	struct oa_u32 *e = oatab_find(t, key, 1, true);

	if (!e)
		return -ENOMEM;
	e->v = v;
	return 0;
}

uint32_t oatab_get_or_put_u32(struct oatab *t, uint64_t key, uint32_t v, bool *inserted)
{
	size_t n = t->n;
	struct oa_u32 *e = oatab_find(t, key, 1, true);

	if (!e)
		return UINT32_MAX;
	*inserted = t->n != n;
	if (*inserted)
		e->v = v;
	return e->v;
}
