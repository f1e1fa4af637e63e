/* SPDX-License-Identifier: MIT */
/* The verdict rules (see ffm_verdict.h) and the names of problems and groups
 * (ffm_analysis.h): pure functions, no state. */
#include "analysis/ffm_analysis.h"
#include "analysis/ffm_verdict.h"
#include "stages/ffm_model.h"

enum ffm_seen ffm_verdict_seen(const struct ffm_store_sync_use *u, int64_t *delay_ns)
{
	bool used = !(u->flags & FFM_SYNC_USE_NONE) && u->use_delay_ns >= 0;

	/* a use seen by a window set late: used, at a time unknown (only bounded) */
	*delay_ns = used && !(u->flags & FFM_SYNC_USE_LATE) ? u->use_delay_ns : -1;
	if (used)
		return FFM_SEEN_USED;
	if (u->flags & FFM_SYNC_USE_PARTIAL)
		return FFM_SEEN_UNKNOWN;
	return u->prot_hi - u->prot_lo > ffm_verdict_watched(u) ? FFM_SEEN_NONE_PART : FFM_SEEN_NONE;
}

uint64_t ffm_verdict_watched(const struct ffm_store_sync_use *u)
{
	return u->watched_bytes; /* rows before schema 7: set by the migration (store/schema.c) */
}

double ffm_verdict_coverage(const struct ffm_store_sync_use *u)
{
	uint64_t size = u->prot_hi > u->prot_lo ? u->prot_hi - u->prot_lo : 0, c = u->covered_bytes;

	if (!size)
		return -1;
	return c >= size ? 1.0 : (double)c / (double)size;
}

void ffm_verdict_add_range(uint8_t *seen, int64_t *delay_ns, uint8_t row, int64_t row_delay_ns)
{
	/* Used if any range is used, at the earliest use. */
	if (row == FFM_SEEN_USED) {
		if (*seen != FFM_SEEN_USED ||
		    (row_delay_ns >= 0 && (*delay_ns < 0 || row_delay_ns < *delay_ns)))
			*delay_ns = row_delay_ns;
		*seen = FFM_SEEN_USED;
	} else if ((row == FFM_SEEN_UNKNOWN || row == FFM_SEEN_NONE_PART) &&
		   (*seen == FFM_SEEN_NONE || *seen == FFM_SEEN_NONE_PART)) {
		*seen = row;
	}
}

bool ffm_verdict_site_misplaced(int64_t median_delay_ns, uint64_t mean_wait_ns)
{
	/* Moving it must save more than the noise per occurrence: a gap after a sync that found
	 * the GPU done saves nothing (min(gap, wait) = wait = ~0), and a sync misplaced by
	 * nothing stays required, so it still ends a sequence. */
	return median_delay_ns >= (int64_t)FFM_MISPLACED_FLOOR_NS &&
	       mean_wait_ns >= FFM_MISPLACED_FLOOR_NS &&
	       ((uint64_t)median_delay_ns * FFM_MISPLACED_WAIT_DIV >= mean_wait_ns ||
		(uint64_t)median_delay_ns >= FFM_MISPLACED_ABS_NS);
}

bool ffm_verdict_site_host_read(uint64_t used, uint64_t classified, uint64_t max_bytes,
				uint64_t count, bool misplaced)
{
	/* Most occurrences read at once (a site that is sometimes unnecessary has another fix). */
	return !misplaced && used && used * 2 > classified && max_bytes &&
	       max_bytes <= FFM_HOST_READ_MAX_BYTES && count >= FFM_HOST_READ_MIN_COUNT;
}

bool ffm_verdict_host_read_removed(uint64_t k, unsigned every)
{
	if (!every)
		every = FFM_HOST_READ_EVERY;
	return every > 1 && k % every != every - 1;
}

bool ffm_verdict_read_conditional(uint64_t before, uint64_t after)
{
	return before && before >= after;
}

enum ffm_verdict ffm_verdict_sync(uint8_t seen, bool site_used, bool site_misplaced,
				  int64_t delay_ns, uint64_t wait_ns)
{
	if (seen == FFM_SEEN_NONE_PART) /* decided by the site */
		seen = site_used ? FFM_SEEN_UNKNOWN : FFM_SEEN_NONE;
	switch (seen) {
	case FFM_SEEN_NONE: return FFM_VERDICT_UNNECESSARY;
	case FFM_SEEN_UNKNOWN: /* a misplaced site's sync: the site's verdict, as it decides above */
		return site_misplaced && wait_ns ? FFM_VERDICT_MISPLACED : FFM_VERDICT_WITHHELD;
	default:
		return site_misplaced && delay_ns > 0 && wait_ns ? FFM_VERDICT_MISPLACED
								   : FFM_VERDICT_REQUIRED;
	}
}

int64_t ffm_verdict_misplaced_delay(uint8_t seen, int64_t delay_ns, int64_t site_delay_ns)
{
	return seen == FFM_SEEN_USED ? delay_ns : site_delay_ns;
}

unsigned ffm_verdict_problem(enum ffm_verdict v)
{
	return v == FFM_VERDICT_UNNECESSARY ? FFM_PROBLEM_UNNECESSARY_SYNC :
	       v == FFM_VERDICT_MISPLACED ? FFM_PROBLEM_MISPLACED_SYNC : FFM_PROBLEM_NONE;
}

size_t ffm_verdict_join(uint64_t k, uint64_t n2, size_t n)
{
	size_t j = n2 ? (size_t)((unsigned __int128)k * n / n2) : 0;

	return j >= n ? (n ? n - 1 : 0) : j;
}

bool ffm_verdict_counts_differ(uint64_t n2, uint64_t n)
{
	uint64_t diff = n2 > n ? n2 - n : n - n2, tol = n2 * FFM_JOIN_TOLERANCE_PCT / 100;

	return diff > (tol > 1 ? tol : 1);
}

uint8_t ffm_verdict_majority_sync(const size_t cnt[4], size_t n)
{
	if ((cnt[FFM_SEEN_NONE] + cnt[FFM_SEEN_NONE_PART]) * 2 > n)
		return cnt[FFM_SEEN_NONE_PART] ? FFM_SEEN_NONE_PART : FFM_SEEN_NONE;
	return cnt[FFM_SEEN_USED] >= cnt[FFM_SEEN_UNKNOWN] ? FFM_SEEN_USED : FFM_SEEN_UNKNOWN;
}

uint8_t ffm_verdict_majority_dup(const size_t cnt[4])
{
	uint8_t best = 0;

	for (uint8_t c = 1; c < 4; c++)
		if (cnt[c] > cnt[best])
			best = c;
	return best;
}

const char *ffm_an_grouping_name(enum ffm_grouping g)
{
	return g == FFM_GROUP_FOLD ? "function" : g == FFM_GROUP_SEQUENCE ? "sequence" : "point";
}

const char *ffm_an_problem_name(unsigned problem)
{
	static const char *const names[FFM_PROBLEM__MAX] = {
		[FFM_PROBLEM_UNNECESSARY_SYNC] = "unnecessary_sync",
		[FFM_PROBLEM_MISPLACED_SYNC] = "misplaced_sync",
		[FFM_PROBLEM_DUPLICATE_TRANSFER] = "duplicate_transfer",
		[FFM_PROBLEM_HOST_READ] = "host_read_every_iteration",
		[FFM_PROBLEM_LAUNCH_BLOCKED] = "launch_blocked",
		[FFM_PROBLEM_TEMP_BUFFER] = "temp_buffer",
	};

	return problem < FFM_PROBLEM__MAX && names[problem] ? names[problem] : "none";
}

/* The most frequent type, but a host read names any group it is in: its fix (read the value
 * every N iterations) is what the group's other calls, such as the copy before it, need too. */
unsigned ffm_an_main_problem(const uint64_t *n_type)
{
	unsigned best = FFM_PROBLEM_NONE;

	if (n_type[FFM_PROBLEM_HOST_READ])
		return FFM_PROBLEM_HOST_READ;
	for (unsigned t = 1; t < FFM_PROBLEM__MAX; t++)
		if (n_type[t] > (best ? n_type[best] : 0))
			best = t;
	if (n_type[FFM_PROBLEM_DUPLICATE_TRANSFER] &&
	    2 * n_type[FFM_PROBLEM_DUPLICATE_TRANSFER] >= n_type[best])
		return FFM_PROBLEM_DUPLICATE_TRANSFER;
	return best;
}

unsigned ffm_an_site_problem(const struct ffm_an_site *x)
{
	uint64_t n[FFM_PROBLEM__MAX] = { 0, x->n_unnecessary, x->n_misplaced, x->n_dup,
					 x->n_host_read, x->n_launch_blocked, x->n_temp_buffer };

	return ffm_an_main_problem(n);
}
