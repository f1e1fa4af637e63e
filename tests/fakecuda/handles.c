/* SPDX-License-Identifier: MIT */
/*
 * Registry of live handles. The real driver answers a stale or garbage CUstream/CUevent/
 * CUcontext with CUDA_ERROR_INVALID_HANDLE/INVALID_CONTEXT instead of crashing, and the
 * workloads' error paths are tested against that, so the simulator must never dereference a
 * handle it did not check here first. An open-addressing hash set of pointers, one lock.
 */
#include <errno.h>
#include <stdlib.h>

#include "fakecuda.h"

struct slot {
	const void *p; /* NULL: empty */
	enum fk_type type;
};

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static struct slot *reg;
static size_t reg_cap, reg_n; /* reg_cap is a power of two */

static size_t slot_of(const void *p, size_t cap)
{
	uint64_t h = (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ULL;

	return (size_t)(h >> 20) & (cap - 1);
}

static int grow(void)
{
	size_t cap = reg_cap ? 2 * reg_cap : 64;
	struct slot *v = calloc(cap, sizeof(*v));

	if (!v)
		return -ENOMEM;
	for (size_t i = 0; i < reg_cap; i++) {
		size_t j;

		if (!reg[i].p)
			continue;
		for (j = slot_of(reg[i].p, cap); v[j].p; j = (j + 1) & (cap - 1))
			;
		v[j] = reg[i];
	}
	free(reg);
	reg = v;
	reg_cap = cap;
	return 0;
}

int fk_handle_add(const void *p, enum fk_type type)
{
	size_t i;

	pthread_mutex_lock(&reg_lock);
	if (2 * (reg_n + 1) > reg_cap && grow() < 0) {
		pthread_mutex_unlock(&reg_lock);
		return -ENOMEM;
	}
	for (i = slot_of(p, reg_cap); reg[i].p && reg[i].p != p; i = (i + 1) & (reg_cap - 1))
		;
	if (!reg[i].p)
		reg_n++;
	reg[i] = (struct slot){ p, type };
	pthread_mutex_unlock(&reg_lock);
	return 0;
}

void fk_handle_del(const void *p)
{
	size_t i, j;

	pthread_mutex_lock(&reg_lock);
	if (!reg_cap)
		goto out;
	for (i = slot_of(p, reg_cap); reg[i].p && reg[i].p != p; i = (i + 1) & (reg_cap - 1))
		;
	if (!reg[i].p)
		goto out;
	/* Backward-shift deletion: keeps every probe chain unbroken without tombstones. */
	reg[i].p = NULL;
	reg_n--;
	for (j = (i + 1) & (reg_cap - 1); reg[j].p; j = (j + 1) & (reg_cap - 1)) {
		size_t home = slot_of(reg[j].p, reg_cap);

		/* Move reg[j] into the hole at i unless its home lies cyclically in (i, j]. */
		if ((j > i && (home <= i || home > j)) || (j < i && (home <= i && home > j))) {
			reg[i] = reg[j];
			reg[j].p = NULL;
			i = j;
		}
	}
out:
	pthread_mutex_unlock(&reg_lock);
}

bool fk_handle_is(const void *p, enum fk_type type)
{
	bool found = false;

	if (!p)
		return false;
	pthread_mutex_lock(&reg_lock);
	if (reg_cap) {
		size_t i;

		for (i = slot_of(p, reg_cap); reg[i].p && reg[i].p != p; i = (i + 1) & (reg_cap - 1))
			;
		found = reg[i].p == p && reg[i].type == type;
	}
	pthread_mutex_unlock(&reg_lock);
	return found;
}
