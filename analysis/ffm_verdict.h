/* SPDX-License-Identifier: MIT */
/*
 * ffm_verdict.h — the rules that turn what stages 3 and 4 saw into verdicts: pure functions of
 * their arguments (no store, no state), the only place where "unnecessary", "misplaced",
 * "withheld" and a host read are decided. The analysis applies them; no output applies them on
 * its own. Each rule and why: docs/ACCURACY.md, "The verdict rules". Tested by tables
 * (tests/analysis/test_verdicts.c).
 */
#ifndef FFM_ANALYSIS_VERDICT_H
#define FFM_ANALYSIS_VERDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/ffm_store.h"

#define FFM_MISPLACED_FLOOR_NS 20000ull  /* 20 µs: above probe + watchpoint noise */
#define FFM_MISPLACED_WAIT_DIV 10	 /* gap ≥ 10% of the sync's wait ... */
#define FFM_MISPLACED_ABS_NS 1000000ull /* ... or ≥ 1 ms */
#define FFM_JOIN_TOLERANCE_PCT 5
#define FFM_HOST_READ_MAX_BYTES 256	 /* a "small" read: scalars, a few flags */
#define FFM_HOST_READ_MIN_COUNT 100	 /* a loop, not a few reads */
#define FFM_HOST_READ_EVERY 50		 /* default N: the fix reads every N iterations */

/* What stage 3/4 saw after one sync occurrence (values fit in 2 bits). */
enum ffm_seen {
	FFM_SEEN_NONE = 0,	/* no use, every range watched in full */
	FFM_SEEN_USED = 1,	/* a use; the first-use delay is known */
	FFM_SEEN_UNKNOWN = 2,	/* no use seen, not every range watched */
	FFM_SEEN_NONE_PART = 3, /* no use seen, only part of a range watched */
};

/* The verdict of one sync occurrence. */
enum ffm_verdict {
	FFM_VERDICT_REQUIRED = 0,
	FFM_VERDICT_UNNECESSARY,
	FFM_VERDICT_MISPLACED,
	FFM_VERDICT_WITHHELD, /* no use seen, but an unseen use is likely: no verdict */
};

/* One sync_uses row; *delay_ns = its first-use delay when FFM_SEEN_USED, else -1. */
enum ffm_seen ffm_verdict_seen(const struct ffm_store_sync_use *u, int64_t *delay_ns);
/* Bytes of a row's protected range watched during its sync's window. */
uint64_t ffm_verdict_watched(const struct ffm_store_sync_use *u);
/* The share of a row's protected range watched at least once up to its sync, 0..1 (-1: it
 * protects nothing). */
double ffm_verdict_coverage(const struct ffm_store_sync_use *u);
/* Another protected range (@row, @row_delay_ns) of the occurrence in (*seen, *delay_ns). */
void ffm_verdict_add_range(uint8_t *seen, int64_t *delay_ns, uint8_t row, int64_t row_delay_ns);

/* Whether a site's used syncs are misplaced, from the median first-use delay of its used
 * occurrences (-1: none timed) and its mean wait per call. */
bool ffm_verdict_site_misplaced(int64_t median_delay_ns, uint64_t mean_wait_ns);

/* Whether a site is a host read every iteration: @used of its @classified occurrences (stage 3
 * rows) were seen used, @max_bytes the most bytes one occurrence protected, @count its
 * occurrences in the timeline, @misplaced its misplaced decision. */
bool ffm_verdict_site_host_read(uint64_t used, uint64_t classified, uint64_t max_bytes,
				uint64_t count, bool misplaced);
/* Whether occurrence @k (0-based) of a host-read site is one the fix removes, reading every
 * @every iterations (0: FFM_HOST_READ_EVERY): all but the last of each @every. */
bool ffm_verdict_host_read_removed(uint64_t k, unsigned every);
/* Whether a host-read site is conditional (the required-read rule, docs/ACCURACY.md): of its
 * removed reads whose first use and next GPU submission were both timed, @before had the use
 * come before the thread's next submission (the value may feed it), @after not. Conditional
 * when at least half of them did; never when none was judged. */
bool ffm_verdict_read_conditional(uint64_t before, uint64_t after);

/*
 * One occurrence's verdict: what it saw, whether stage 3 saw a use after any sync of its site,
 * whether its site is misplaced, its first-use delay (-1: none) and its wait. MISPLACED with
 * no use seen: the caller applies the site's median delay.
 */
enum ffm_verdict ffm_verdict_sync(uint8_t seen, bool site_used, bool site_misplaced,
				  int64_t delay_ns, uint64_t wait_ns);
/* The first-use delay a MISPLACED verdict is priced at: the occurrence's own @delay_ns where
 * its use was seen (@seen), else its site's median @site_delay_ns. */
int64_t ffm_verdict_misplaced_delay(uint8_t seen, int64_t delay_ns, int64_t site_delay_ns);
/* FFM_PROBLEM_* of a verdict (NONE for required and withheld). */
unsigned ffm_verdict_problem(enum ffm_verdict v);

/*
 * Joining stage 3/4 rows to the timeline, per stack: occurrence k of the timeline's n2 takes row
 * floor(k * n / n2) of the n rows (the identity when the counts agree). When the counts differ
 * beyond FFM_JOIN_TOLERANCE_PCT (ffm_verdict_counts_differ) the runs did different things at that
 * site: every occurrence gets the site's majority (ffm_verdict_majority_*), and the site is
 * flagged divergent.
 */
size_t ffm_verdict_join(uint64_t k, uint64_t n2, size_t n);
bool ffm_verdict_counts_differ(uint64_t n2, uint64_t n);
/* @cnt[s]: rows that saw enum ffm_seen s, of @n. */
uint8_t ffm_verdict_majority_sync(const size_t cnt[4], size_t n);
/* @cnt[d]: rows of enum ffm_dup_kind d. */
uint8_t ffm_verdict_majority_dup(const size_t cnt[4]);

#endif
