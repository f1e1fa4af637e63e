/* SPDX-License-Identifier: MIT */
/*
 * The allocation table. Device memory is host memory at the same address (CUdeviceptr is the
 * address), so the engine moves real bytes and ffm's hashing and first-touch detection see
 * real data. What the table adds is the *kind* of each range, which decides how copies behave:
 * a DtoH copy into pageable memory synchronizes, into pinned memory it does not; memset on
 * managed memory synchronizes, on device memory it does not.
 *
 * A sorted array with binary search: allocations are few and lookups frequent.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fakecuda.h"

static pthread_mutex_t mem_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fk_alloc *allocs;
static size_t nallocs, cap_allocs;

/*
 * Device mappings freed and kept for the next allocation of the same size, as a real driver's
 * allocator keeps freed blocks: a loop that allocates and frees a temporary every step then
 * pays what FAKECUDA_ALLOC_US and FAKECUDA_FREE_US plant, not the host's mapping, populating
 * and unmapping of its pages (58 ms a step for 64 MiB on a 2-core CI VM, 250 ms with four
 * threads). Their contents are what the last user left, as on a GPU. Under mem_lock.
 */
#define SPARE_MAX 8
#define SPARE_BYTES (256u << 20) /* kept at most, all together */
static struct spare {
	void *p;
	size_t mapped;
} spares[SPARE_MAX];
static size_t nspares, spare_bytes;

/* A kept mapping of @mapped bytes (below 4 GiB with @low32), taken; NULL when none. */
static void *spare_take(size_t mapped, bool low32)
{
	void *p = NULL;

	pthread_mutex_lock(&mem_lock);
	for (size_t i = 0; i < nspares; i++) {
		if (spares[i].mapped != mapped || (low32 && (uintptr_t)spares[i].p + mapped > 1ull << 32))
			continue;
		p = spares[i].p;
		spare_bytes -= mapped;
		spares[i] = spares[--nspares];
		break;
	}
	pthread_mutex_unlock(&mem_lock);
	return p;
}

/* Keeps a freed device mapping for later; false when there is no room (unmap it). */
static bool spare_keep(void *p, size_t mapped)
{
	bool kept = false;

	pthread_mutex_lock(&mem_lock);
	if (nspares < SPARE_MAX && spare_bytes + mapped <= SPARE_BYTES) {
		spares[nspares++] = (struct spare){ .p = p, .mapped = mapped };
		spare_bytes += mapped;
		kept = true;
	}
	pthread_mutex_unlock(&mem_lock);
	return kept;
}

/* Index of the first allocation with base > addr. Under mem_lock. */
static size_t upper_bound(uintptr_t addr)
{
	size_t lo = 0, hi = nallocs;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (allocs[mid].base <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The allocation containing addr, or NULL. Under mem_lock. */
static struct fk_alloc *find_locked(uintptr_t addr)
{
	size_t i = upper_bound(addr);

	if (i == 0)
		return NULL;
	if (addr - allocs[i - 1].base < allocs[i - 1].size)
		return &allocs[i - 1];
	return NULL;
}

static CUresult insert(const struct fk_alloc *a)
{
	size_t i;

	pthread_mutex_lock(&mem_lock);
	/* Registering a range that overlaps a known one is an error in the real driver too. */
	i = upper_bound(a->base);
	if ((i > 0 && a->base - allocs[i - 1].base < allocs[i - 1].size) ||
	    (i < nallocs && allocs[i].base - a->base < a->size)) {
		pthread_mutex_unlock(&mem_lock);
		return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
	}
	if (nallocs == cap_allocs) {
		size_t cap = cap_allocs ? 2 * cap_allocs : 64;
		struct fk_alloc *v = realloc(allocs, cap * sizeof(*v));

		if (!v) {
			pthread_mutex_unlock(&mem_lock);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		allocs = v;
		cap_allocs = cap;
	}
	memmove(&allocs[i + 1], &allocs[i], (nallocs - i) * sizeof(*allocs));
	allocs[i] = *a;
	nallocs++;
	pthread_mutex_unlock(&mem_lock);
	return CUDA_SUCCESS;
}

CUresult fk_mem_alloc(struct fk_ctx *ctx, size_t size, enum fk_mem_kind kind, unsigned int flags,
		      bool low32, void **ret)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	size_t mapped;
	void *p;
	CUresult r;

	if (!size)
		return CUDA_ERROR_INVALID_VALUE;
	if (size > FK_DEVICE_MEM)
		return CUDA_ERROR_OUT_OF_MEMORY;
	mapped = (size + page - 1) & ~(page - 1);
	/*
	 * mmap: page-aligned (the real driver aligns to at least 256 bytes) and zero-filled, or
	 * a freed device mapping of the same size (spares above) with its old contents.
	 * Device and pinned memory are populated now, as they are resident on a real system: a
	 * copy's first touch must not pay page faults the model does not know about. Managed
	 * memory is populated on first touch, like the real thing. The legacy 32-bit API
	 * (cuMemAlloc with CUdeviceptr_v1) needs an address below 4 GiB.
	 */
	p = kind == FK_MEM_DEVICE ? spare_take(mapped, low32) : NULL;
	if (!p)
		p = mmap(NULL, mapped, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS |
				 (kind == FK_MEM_MANAGED ? MAP_NORESERVE : MAP_POPULATE) |
				 (low32 ? MAP_32BIT : 0),
			 -1, 0);
	if (p == MAP_FAILED)
		return CUDA_ERROR_OUT_OF_MEMORY;
	r = insert(&(struct fk_alloc){ .base = (uintptr_t)p, .size = size, .mapped = mapped,
				       .kind = kind, .flags = flags, .ctx = ctx });
	if (r == CUDA_SUCCESS && kind == FK_MEM_MANAGED && fk_mig_add(p, mapped)) {
		fk_mem_release((uintptr_t)p, 1u << FK_MEM_MANAGED);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (r != CUDA_SUCCESS) {
		munmap(p, mapped);
		return r == CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED ? CUDA_ERROR_UNKNOWN : r;
	}
	*ret = p;
	return CUDA_SUCCESS;
}

CUresult fk_mem_register(struct fk_ctx *ctx, void *p, size_t size, unsigned int flags)
{
	if (!p || !size)
		return CUDA_ERROR_INVALID_VALUE;
	return insert(&(struct fk_alloc){ .base = (uintptr_t)p, .size = size, .mapped = 0,
					  .kind = FK_MEM_REGISTERED, .flags = flags, .ctx = ctx });
}

CUresult fk_mem_release(uintptr_t base, unsigned int kinds_mask)
{
	struct fk_alloc a;
	size_t i;

	pthread_mutex_lock(&mem_lock);
	i = upper_bound(base);
	if (i == 0 || allocs[i - 1].base != base || !(kinds_mask & (1u << allocs[i - 1].kind))) {
		pthread_mutex_unlock(&mem_lock);
		return CUDA_ERROR_INVALID_VALUE;
	}
	a = allocs[i - 1];
	memmove(&allocs[i - 1], &allocs[i], (nallocs - i) * sizeof(*allocs));
	nallocs--;
	pthread_mutex_unlock(&mem_lock);
	if (a.kind == FK_MEM_MANAGED)
		fk_mig_remove(a.base);
	if (a.mapped && !(a.kind == FK_MEM_DEVICE && spare_keep((void *)a.base, a.mapped)))
		munmap((void *)a.base, a.mapped);
	return CUDA_SUCCESS;
}

bool fk_mem_lookup(uintptr_t addr, struct fk_alloc *out)
{
	struct fk_alloc *a;

	pthread_mutex_lock(&mem_lock);
	a = find_locked(addr);
	if (a && out)
		*out = *a;
	pthread_mutex_unlock(&mem_lock);
	return a != NULL;
}

enum fk_mem_kind fk_mem_kind_of(const void *p, size_t len, struct fk_alloc *out)
{
	enum fk_mem_kind kind = FK_MEM_PAGEABLE;
	uintptr_t addr = (uintptr_t)p;
	struct fk_alloc *a;

	pthread_mutex_lock(&mem_lock);
	a = find_locked(addr);
	/* A range that runs past its allocation's end is not that kind of memory as a whole. */
	if (a && len <= a->size - (addr - a->base)) {
		kind = a->kind;
		if (out)
			*out = *a;
	}
	pthread_mutex_unlock(&mem_lock);
	return kind;
}

void fk_mem_usage(size_t *device_bytes)
{
	size_t sum = 0;

	pthread_mutex_lock(&mem_lock);
	for (size_t i = 0; i < nallocs; i++)
		if (allocs[i].kind == FK_MEM_DEVICE || allocs[i].kind == FK_MEM_MANAGED)
			sum += allocs[i].size;
	pthread_mutex_unlock(&mem_lock);
	*device_bytes = sum;
}
