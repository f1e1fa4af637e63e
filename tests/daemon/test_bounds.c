/* SPDX-License-Identifier: MIT */
/*
 * A job run's bounds (daemon/recorder.h, struct ffm_run_limits; docs/SECURITY.md, "Resource
 * bounds per job and user"), without BPF: records made up here go through ffm_jobrun__record
 * into a run's store. New stacks stop at limits.stacks and at the rate's burst, counted as
 * stack_cap drops; the runs of one user stop writing once their stores together grew by
 * user_store_bytes, though each alone is under it (store_cap drops); another user's run goes on.
 */
#include <sqlite3.h>
#include <sys/stat.h>

#include "bpf/ffm.h"
#include "common/util.h"
#include "daemon/apis.h"
#include "daemon/jobrun.h"
#include "store/ffm_store.h"
#include "symbols/ffm_stack.h"
#include "tests/testutil.h"

static char T[] = "/tmp/ffm-test-bounds.XXXXXX";
static struct ffm_symbolizer *sym;
static struct ffm_apis *apis;
/* No such process: its stacks are stored as the addresses BPF saw. */
#define TGID 4000000u

TEST(setup)
{
	ASSERT(mkdtemp(T));
	ASSERT_OK(ffm_symbolizer__new(NULL, &sym));
	ASSERT_OK(ffm_apis__new(&apis));
}

static struct ffm_jobrun *begin(const char *key, uint32_t uid, const struct ffm_run_limits *l)
{
	struct ffm_jobrun *jr = NULL;

	ASSERT_OK(ffm_jobrun__begin(&(struct ffm_jobrun_opts){
		.sz = sizeof(struct ffm_jobrun_opts), .state_dir = T, .key = key, .job_id = key,
		.uid = uid, .node = "n", .override_stage = 1, .sym = sym, .apis = apis, .limits = l,
	}, &jr));
	return jr;
}

/* The drops of @reason in @jr's run (after its end). */
static int64_t drops_of(struct ffm_jobrun *jr, enum ffm_drop_reason reason)
{
	struct ffm_store_drops d;

	ASSERT_OK(ffm_store__get_drops(ffm_jobrun__store(jr), ffm_jobrun__run_id(jr), &d));
	return (int64_t)d.count[reason];
}

static void put_stack(struct ffm_jobrun *jr, uint64_t key)
{
	static struct ffm_rec_stack s; /* 17 KiB */

	memset(&s, 0, sizeof(s));
	s.hdr = (struct ffm_rec_hdr){ .type = FFM_REC_STACK, .tgid = TGID, .tid = TGID };
	s.stack_key = key;
	s.nlib = 1;
	s.lib[0] = 0x1000 + key * 16; /* a stack of its own */
	ASSERT_OK(ffm_jobrun__record(jr, &s, sizeof(s)));
}

static void put_wait(struct ffm_jobrun *jr, uint64_t i)
{
	struct ffm_rec_wait w = {
		.hdr = { .type = FFM_REC_WAIT, .tgid = TGID, .tid = TGID, .ts_ns = i },
		.start_ns = i * 1000, .dur_ns = 500 + i % 977, .api_id = 0xffff,
	};

	ASSERT_OK(ffm_jobrun__record(jr, &w, sizeof(w)));
}

static int64_t count_stacks(struct ffm_jobrun *jr)
{
	sqlite3 *db = NULL;
	sqlite3_stmt *st = NULL;
	int64_t n = -1;

	ASSERT_OK(ffm_store__flush(ffm_jobrun__store(jr)));
	ASSERT_EQ(sqlite3_open_v2(ffm_store__path(ffm_jobrun__store(jr)), &db, SQLITE_OPEN_READONLY,
				  NULL), SQLITE_OK);
	ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT count(*) FROM stacks", -1, &st, NULL), SQLITE_OK);
	if (sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

TEST(new_stacks_stop_at_the_bound)
{
	struct ffm_run_limits l = { .stacks = 10 };
	struct ffm_jobrun *jr = begin("stacks", 5001, &l);

	for (uint64_t k = 1; k <= 50; k++)
		put_stack(jr, k);
	ASSERT_EQ(count_stacks(jr), 10);
	ASSERT_OK(ffm_jobrun__end(jr, 1, 0, false, true));
	ASSERT_EQ(drops_of(jr, FFM_DROP_STACK_CAP), 40);
	ffm_jobrun__free(jr);
}

TEST(new_stacks_stop_at_the_rate)
{
	/* 2 a second: a burst of FFM_STACK_BURST_S seconds' worth, then about 2 a second. */
	struct ffm_run_limits l = { .stacks_per_s = 2 };
	struct ffm_jobrun *jr = begin("rate", 5001, &l);

	for (uint64_t k = 1; k <= 50; k++)
		put_stack(jr, k);
	ASSERT_EQ(count_stacks(jr), 2 * FFM_STACK_BURST_S);
	ASSERT_OK(ffm_jobrun__end(jr, 1, 0, false, true));
	ASSERT_EQ(drops_of(jr, FFM_DROP_STACK_CAP), 50 - 2 * FFM_STACK_BURST_S);
	ffm_jobrun__free(jr);
}

static uint64_t file_bytes(struct ffm_jobrun *jr)
{
	char wal[4200];
	struct stat st;
	uint64_t n = 0;

	if (stat(ffm_store__path(ffm_jobrun__store(jr)), &st) == 0)
		n += (uint64_t)st.st_size;
	snprintf(wal, sizeof(wal), "%s-wal", ffm_store__path(ffm_jobrun__store(jr)));
	if (stat(wal, &st) == 0)
		n += (uint64_t)st.st_size;
	return n;
}

TEST(a_users_runs_share_the_user_bound)
{
	struct ffm_run_limits l = { .user_store_bytes = 4u << 20 };
	struct ffm_jobrun *a = begin("user-a", 5002, &l), *b = begin("user-b", 5002, &l);
	struct ffm_jobrun *other = begin("other", 5003, &l);
	uint64_t a0 = file_bytes(a), b0 = file_bytes(b);
	struct ffm_recorder_stats sa, sb, so;
	double t0 = ffm_now_s();
	uint64_t i = 0;

	/* Both write until both stop (the user's stores grew by 4 MiB together), 20 s at most. */
	do {
		for (int k = 0; k < 1000; k++, i++) {
			put_wait(a, i);
			put_wait(b, i);
		}
		ffm_recorder__stats(ffm_jobrun__recorder(a), &sa);
		ffm_recorder__stats(ffm_jobrun__recorder(b), &sb);
	} while ((!sa.not_stored || !sb.not_stored) && ffm_now_s() - t0 < 20);
	ASSERT_MSG(sa.not_stored && sb.not_stored, "the user's runs stopped (%" PRIu64 ", %" PRIu64
		   " records not stored) after %" PRIu64 " each", sa.not_stored, sb.not_stored, i);
	/* Each alone grew by less than the user's bound: together they reached it. */
	ASSERT_MSG(file_bytes(a) - a0 < (4u << 20) && file_bytes(b) - b0 < (4u << 20),
		   "grew by %" PRIu64 " and %" PRIu64 " bytes", file_bytes(a) - a0, file_bytes(b) - b0);
	for (int k = 0; k < 1000; k++)
		put_wait(other, (uint64_t)k);
	ffm_recorder__stats(ffm_jobrun__recorder(other), &so);
	ASSERT_EQ(so.not_stored, 0);
	ASSERT_OK(ffm_jobrun__end(a, 1, 0, false, true));
	ASSERT_OK(ffm_jobrun__end(other, 1, 0, false, true));
	ASSERT(drops_of(a, FFM_DROP_STORE_CAP) > 0);
	ASSERT_EQ(drops_of(other, FFM_DROP_STORE_CAP), 0);
	ffm_jobrun__free(a);
	ffm_jobrun__free(b);
	ffm_jobrun__free(other);
}

TEST(cleanup)
{
	char cmd[128];

	ffm_symbolizer__free(sym);
	ffm_apis__free(apis);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", T);
	ASSERT_EQ(system(cmd), 0);
}

TEST_MAIN()
