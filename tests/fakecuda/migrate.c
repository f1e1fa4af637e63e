/* SPDX-License-Identifier: MIT */
/*
 * Managed memory's page migration, planted by FAKECUDA_MIGRATE_PAGE_US and
 * FAKECUDA_FAULT_PAGE_US (off when both are 0, the default: then managed memory is plain host
 * memory, as before). With either set, every managed allocation is kept PROT_NONE while no
 * device operation uses it, and each page remembers who touched it last:
 *  - a device operation (memset, copy, ffm_work, ffm_hang) on pages the host touched last
 *    migrates them: MIGRATE_PAGE_US per page, added to the operation's GPU time;
 *  - the host's first touch of a page the device used last faults: the SIGSEGV handler below
 *    spends FAULT_PAGE_US on the faulting thread and opens the page to the host.
 * A fault outside managed memory goes to the handler that was there before.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "fakecuda.h"

#define FK_MIG_MAX 256
enum { PAGE_UNTOUCHED, PAGE_HOST, PAGE_DEVICE };

static struct fk_mig {
	_Atomic uintptr_t base; /* 0: a free slot */
	size_t len;
	uint8_t *state; /* per page */
} migs[FK_MIG_MAX];
static pthread_mutex_t mig_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction old_segv;
static pthread_once_t handler_once = PTHREAD_ONCE_INIT;
static int handler_err;
static size_t page_size;

bool fk_mig_enabled(void)
{
	return fk_config.migrate_page_ns || fk_config.fault_page_ns;
}

static struct fk_mig *mig_find(uintptr_t a)
{
	for (int i = 0; i < FK_MIG_MAX; i++) {
		uintptr_t b = atomic_load_explicit(&migs[i].base, memory_order_acquire);

		if (b && a - b < migs[i].len)
			return &migs[i];
	}
	return NULL;
}

/* Async-signal-safe: clock_gettime and mprotect only. */
static void spend(uint64_t ns)
{
	struct timespec t0, t;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	do
		clock_gettime(CLOCK_MONOTONIC, &t);
	while ((uint64_t)(t.tv_sec - t0.tv_sec) * 1000000000ull + (uint64_t)t.tv_nsec -
		       (uint64_t)t0.tv_nsec < ns);
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	uintptr_t a = (uintptr_t)si->si_addr;
	struct fk_mig *m = mig_find(a);
	size_t page;

	(void)sig, (void)uc;
	if (!m) {
		/* Not ours: the previous disposition takes the fault when it happens again. */
		sigaction(SIGSEGV, &old_segv, NULL);
		return;
	}
	page = (a - atomic_load(&m->base)) / page_size;
	if (m->state[page] == PAGE_DEVICE)
		spend(fk_config.fault_page_ns);
	m->state[page] = PAGE_HOST;
	if (mprotect((void *)(atomic_load(&m->base) + page * page_size), page_size,
		     PROT_READ | PROT_WRITE) < 0)
		sigaction(SIGSEGV, &old_segv, NULL); /* the fault again, without us: not a loop */
}

static void install_handler(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_NODEFER;
	sigemptyset(&sa.sa_mask);
	page_size = (size_t)sysconf(_SC_PAGESIZE);
	handler_err = sigaction(SIGSEGV, &sa, &old_segv) < 0 ? -errno : 0;
}

int fk_mig_add(void *p, size_t mapped)
{
	int err = -ENOMEM;

	if (!fk_mig_enabled())
		return 0;
	pthread_once(&handler_once, install_handler);
	if (handler_err)
		return handler_err;
	pthread_mutex_lock(&mig_lock);
	for (int i = 0; i < FK_MIG_MAX; i++) {
		if (atomic_load(&migs[i].base))
			continue;
		migs[i].state = calloc(mapped / page_size, 1);
		if (!migs[i].state)
			break;
		migs[i].len = mapped;
		err = mprotect(p, mapped, PROT_NONE) < 0 ? -errno : 0;
		if (!err)
			atomic_store_explicit(&migs[i].base, (uintptr_t)p, memory_order_release);
		else
			free(migs[i].state);
		break;
	}
	pthread_mutex_unlock(&mig_lock);
	return err;
}

void fk_mig_remove(uintptr_t base)
{
	pthread_mutex_lock(&mig_lock);
	for (int i = 0; i < FK_MIG_MAX; i++)
		if (atomic_load(&migs[i].base) == base) {
			atomic_store(&migs[i].base, 0);
			free(migs[i].state);
			migs[i].state = NULL;
		}
	pthread_mutex_unlock(&mig_lock);
}

/* The pages of [p, p+n) in @m, rounded out to whole pages. */
static void page_span(const struct fk_mig *m, const void *p, size_t n, size_t *first,
		      size_t *end)
{
	uintptr_t b = atomic_load(&m->base), a = (uintptr_t)p;
	size_t last = a - b + (n ? n : 1) - 1;

	*first = (a - b) / page_size;
	*end = (last < m->len ? last : m->len - 1) / page_size + 1;
}

uint64_t fk_mig_device_use(const void *p, size_t n)
{
	struct fk_mig *m = p ? mig_find((uintptr_t)p) : NULL;
	size_t first, end, moved = 0;

	if (!m)
		return 0;
	page_span(m, p, n, &first, &end);
	for (size_t i = first; i < end; i++) {
		moved += m->state[i] == PAGE_HOST;
		m->state[i] = PAGE_DEVICE;
	}
	if (mprotect((void *)(atomic_load(&m->base) + first * page_size), (end - first) * page_size,
		     PROT_READ | PROT_WRITE) < 0)
		abort(); /* the engine could not touch the bytes: nothing sane to simulate */
	return moved * fk_config.migrate_page_ns;
}

void fk_mig_device_done(const void *p, size_t n)
{
	struct fk_mig *m = p ? mig_find((uintptr_t)p) : NULL;
	size_t first, end;

	if (!m)
		return;
	page_span(m, p, n, &first, &end);
	if (mprotect((void *)(atomic_load(&m->base) + first * page_size), (end - first) * page_size,
		     PROT_NONE) < 0)
		abort();
}
