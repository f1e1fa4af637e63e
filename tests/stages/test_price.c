// SPDX-License-Identifier: MIT
/* Table-driven tests of the node model (symbols/ffm_node_model.h) and of pricing a fix
 * (stages/ffm_price.h): every rule on variants that differ in size, memory kind, wait length
 * and schedule mode. */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "tests/testutil.h"

#include "stages/ffm_price.h"

#define KiB 1024ull
#define MiB (1024ull * 1024)

/* A node as the probe would describe it (figures chosen so that each rule's parts differ). */
static const char *const probe_lines[] = {
	"GPU ffm test GPU sm_90 81559",
	"COPY h2d pinned 4096 10000", "COPY h2d pageable 4096 15000", "COPY h2d managed 4096 11000",
	"COPY d2h pinned 4096 12000", "COPY d2h pageable 4096 20000", "COPY d2h managed 4096 13000",
	"COPY h2d pinned 65536 15000", "COPY h2d pageable 65536 30000",
	"COPY h2d managed 65536 18000", "COPY d2h pinned 65536 16000",
	"COPY d2h pageable 65536 40000", "COPY d2h managed 65536 20000",
	"COPY h2d pinned 1048576 60000", "COPY h2d pageable 1048576 200000",
	"COPY h2d managed 1048576 80000", "COPY d2h pinned 1048576 70000",
	"COPY d2h pageable 1048576 300000", "COPY d2h managed 1048576 90000",
	"COPY h2d pinned 16777216 700000", "COPY h2d pageable 16777216 3000000",
	"COPY h2d managed 16777216 900000", "COPY d2h pinned 16777216 750000",
	"COPY d2h pageable 16777216 4000000", "COPY d2h managed 16777216 950000",
	"COPY h2d pinned 67108864 2700000", "COPY h2d pageable 67108864 12000000",
	"COPY h2d managed 67108864 3500000", "COPY d2h pinned 67108864 2900000",
	"COPY d2h pageable 67108864 16000000", "COPY d2h managed 67108864 3700000",
	"MIGRATE to_device 4096 256 128000", "MIGRATE to_host 4096 256 512000",
	"FAULTS to_host 256 16",
	"EXIT spin 20000 1000", "EXIT yield 20000 3000", "EXIT blocking 20000 5000",
	"EXIT spin 100000 1000", "EXIT yield 100000 4000", "EXIT blocking 100000 10000",
	"EXIT spin 1000000 1000", "EXIT yield 1000000 6000", "EXIT blocking 1000000 60000",
	"EXIT spin 5000000 1000", "EXIT yield 5000000 8000", "EXIT blocking 5000000 90000",
	"MEASURED 2.5",
};

static void node(struct ffm_node_model *nm)
{
	ffm_node_model__init(nm);
	for (size_t i = 0; i < sizeof(probe_lines) / sizeof(probe_lines[0]); i++)
		ASSERT_EQ(ffm_node_model__parse_line(nm, probe_lines[i]),
			  i + 1 == sizeof(probe_lines) / sizeof(probe_lines[0]));
	ASSERT_OK(ffm_node_model__complete(nm));
}

#define CALL(k, d, m, b, n, call, wait, mode, before, after, faults)                              \
	{ FFM_PRICE_##k, FFM_COPY_##d, FFM_MEM_##m, b, n, call, wait, FFM_SCHED_##mode, before,    \
	  after, faults }

struct call_case {
	const char *name;
	struct ffm_price_call c;
	int err;
	double saved, own, migrate, fault, staging;
};

/* (a) delete a call: its own time + migrations + host faults that follow. */
static const struct call_case delete_cases[] = {
	{ "managed memset 2 MiB, host before and after, recorded sync: own + every page faults",
	  CALL(MEMSET, H2D, MANAGED, 2 * MiB, 1000, 300e3, 250e3, BLOCKING, true, true, -1), 0,
	  1000 * (300e3 + 512 * 2000.0), 1000 * 300e3, 0, 1000 * 512 * 2000.0, 0 },
	{ "managed memset 64 KiB, not recorded, stage 4 counted 3 faults: migration + 3 faults",
	  CALL(MEMSET, H2D, MANAGED, 64 * KiB, 10, -1, 0, SPIN, true, false, 3), 0,
	  10 * (16 * 500.0 + 3 * 2000.0), 0, 10 * 16 * 500.0, 10 * 3 * 2000.0, 0 },
	{ "managed memset 16 MiB recorded but never waited: the GPU's migration counts",
	  CALL(MEMSET, H2D, MANAGED, 16 * MiB, 4, 20e3, 0, YIELD, true, false, 0), 0,
	  4 * (20e3 + 4096 * 500.0), 4 * 20e3, 4 * 4096 * 500.0, 0, 0 },
	{ "pageable D2H 1 MiB, not recorded: the model's pageable time",
	  CALL(COPY, D2H, PAGEABLE, 1 * MiB, 5, -1, 0, SPIN, false, false, -1), 0, 5 * 300e3,
	  5 * 300e3, 0, 0, 0 },
	{ "pinned H2D 64 MiB recorded: the recorded time",
	  CALL(COPY, H2D, PINNED, 64 * MiB, 2, 3e6, 0, BLOCKING, false, false, -1), 0, 2 * 3e6,
	  2 * 3e6, 0, 0, 0 },
	{ "device memset 4 KiB: no migration whoever touched",
	  CALL(MEMSET, H2D, PINNED, 4 * KiB, 7, 9e3, 0, SPIN, true, true, 5), 0, 7 * 9e3, 7 * 9e3,
	  0, 0, 0 },
	{ "sync not recorded: no figure", CALL(SYNC, H2D, PINNED, 0, 1, -1, 0, SPIN, 0, 0, -1),
	  -ENODATA, 0, 0, 0, 0, 0 },
	{ "copy of 0 bytes", CALL(COPY, H2D, PINNED, 0, 1, 5, 0, SPIN, 0, 0, -1), -EINVAL, 0, 0,
	  0, 0, 0 },
	{ "wait longer than the call", CALL(SYNC, H2D, PINNED, 0, 1, 5, 9, SPIN, 0, 0, -1),
	  -EINVAL, 0, 0, 0, 0, 0 },
};

/* (b) pageable -> pinned: the staging cost at the copy's size and direction. */
static const struct call_case pin_cases[] = {
	{ "D2H 1 MiB", CALL(COPY, D2H, PAGEABLE, 1 * MiB, 100, 400e3, 380e3, BLOCKING, 0, 0, -1),
	  0, 100 * 230e3, 0, 0, 0, 100 * 230e3 },
	{ "H2D 4 KiB (at the smallest point)",
	  CALL(COPY, H2D, PAGEABLE, 4 * KiB, 3, -1, 0, SPIN, 0, 0, -1), 0, 3 * 5e3, 0, 0, 0,
	  3 * 5e3 },
	{ "H2D 40 MiB (interpolated)", CALL(COPY, H2D, PAGEABLE, 40 * MiB, 1, -1, 0, YIELD, 0, 0, -1),
	  0, 7.5e6 - 1.7e6, 0, 0, 0, 7.5e6 - 1.7e6 },
	{ "D2H 128 MiB (beyond the largest)",
	  CALL(COPY, D2H, PAGEABLE, 128 * MiB, 1, -1, 0, SPIN, 0, 0, -1), 0,
	  32e6 - (2.9e6 + 2.15e6 * 64 / 48), 0, 0, 0, 32e6 - (2.9e6 + 2.15e6 * 64 / 48) },
	{ "a pinned copy is no candidate", CALL(COPY, D2H, PINNED, 4 * KiB, 1, -1, 0, SPIN, 0, 0, -1),
	  -EINVAL, 0, 0, 0, 0, 0 },
	{ "a managed copy is no candidate",
	  CALL(COPY, H2D, MANAGED, 4 * KiB, 1, -1, 0, SPIN, 0, 0, -1), -EINVAL, 0, 0, 0, 0, 0 },
};

static void check_case(const struct call_case *t, int err, const struct ffm_price *p)
{
	ASSERT_MSG(err == t->err, "%s: err %d, want %d (%s)", t->name, err, t->err,
		   p->why ? p->why : "");
	if (err)
		return;
	ASSERT_MSG(fabs(p->saved_ns - t->saved) < 1, "%s: saved %.1f want %.1f", t->name,
		   p->saved_ns, t->saved);
	ASSERT_MSG(fabs(p->own_ns - t->own) < 1 && fabs(p->migrate_ns - t->migrate) < 1 &&
			   fabs(p->fault_ns - t->fault) < 1 && fabs(p->staging_ns - t->staging) < 1,
		   "%s: parts own %.0f migrate %.0f fault %.0f staging %.0f", t->name, p->own_ns,
		   p->migrate_ns, p->fault_ns, p->staging_ns);
}

TEST(price_delete_table)
{
	struct ffm_node_model nm;

	node(&nm);
	for (size_t i = 0; i < sizeof(delete_cases) / sizeof(delete_cases[0]); i++) {
		struct ffm_price p;

		check_case(&delete_cases[i], ffm_price__delete(&nm, &delete_cases[i].c, &p), &p);
	}
}

TEST(price_pin_table)
{
	struct ffm_node_model nm;
	struct ffm_price p;

	node(&nm);
	for (size_t i = 0; i < sizeof(pin_cases) / sizeof(pin_cases[0]); i++)
		check_case(&pin_cases[i], ffm_price__pin(&nm, &pin_cases[i].c, &p), &p);
	/* Without a model there is nothing to price the other speed with. */
	ASSERT_EQ(ffm_price__pin(NULL, &pin_cases[0].c, &p), -ENODATA);
}

/* (c) a reused buffer: every call of the set but one allocation and one free. */
struct reuse_case {
	const char *name;
	struct ffm_price_call c[3];
	int err;
	double saved, migrate;
};

static const struct reuse_case reuse_cases[] = {
	{ "device 4 KiB, alloc/fill/free each step",
	  { CALL(ALLOC, H2D, PINNED, 4 * KiB, 1000, 50e3, 0, SPIN, 0, 0, -1),
	    CALL(MEMSET, H2D, PINNED, 4 * KiB, 1000, 10e3, 0, SPIN, 0, 0, -1),
	    CALL(FREE, H2D, PINNED, 4 * KiB, 1000, 200e3, 150e3, SPIN, 0, 0, -1) },
	  0, 999 * 50e3 + 1000 * 10e3 + 999 * 200e3, 0 },
	{ "device 64 MiB, blocking frees wait longer",
	  { CALL(ALLOC, H2D, PINNED, 64 * MiB, 20, 400e3, 0, BLOCKING, 0, 0, -1),
	    CALL(MEMSET, H2D, PINNED, 64 * MiB, 20, 30e3, 0, BLOCKING, 0, 0, -1),
	    CALL(FREE, H2D, PINNED, 64 * MiB, 20, 2e6, 1.9e6, BLOCKING, 0, 0, -1) },
	  0, 19 * 400e3 + 20 * 30e3 + 19 * 2e6, 0 },
	{ "managed 1 MiB the host filled: the fill migrates each step",
	  { CALL(ALLOC, H2D, MANAGED, 1 * MiB, 50, 80e3, 0, YIELD, 0, 0, -1),
	    CALL(MEMSET, H2D, MANAGED, 1 * MiB, 50, -1, 0, YIELD, true, false, 0),
	    CALL(FREE, H2D, MANAGED, 1 * MiB, 50, 90e3, 60e3, YIELD, 0, 0, -1) },
	  0, 49 * 80e3 + 50 * 256 * 500.0 + 49 * 90e3, 50 * 256 * 500.0 },
	{ "one step only: nothing to save",
	  { CALL(ALLOC, H2D, PINNED, 16 * MiB, 1, 70e3, 0, SPIN, 0, 0, -1),
	    CALL(FREE, H2D, PINNED, 16 * MiB, 1, 90e3, 0, SPIN, 0, 0, -1),
	    CALL(SYNC, H2D, PINNED, 0, 0, 0, 0, SPIN, 0, 0, -1) },
	  0, 0, 0 },
	{ "an allocation not recorded",
	  { CALL(ALLOC, H2D, PINNED, 16 * MiB, 3, -1, 0, SPIN, 0, 0, -1),
	    CALL(FREE, H2D, PINNED, 16 * MiB, 3, 90e3, 0, SPIN, 0, 0, -1),
	    CALL(SYNC, H2D, PINNED, 0, 0, 0, 0, SPIN, 0, 0, -1) },
	  -ENODATA, 0, 0 },
};

TEST(price_reuse_table)
{
	struct ffm_node_model nm;

	node(&nm);
	for (size_t i = 0; i < sizeof(reuse_cases) / sizeof(reuse_cases[0]); i++) {
		const struct reuse_case *t = &reuse_cases[i];
		struct ffm_price p;
		int err = ffm_price__reuse(&nm, t->c, 3, &p);

		ASSERT_MSG(err == t->err, "%s: err %d (%s)", t->name, err, p.why ? p.why : "");
		if (err)
			continue;
		ASSERT_MSG(fabs(p.saved_ns - t->saved) < 1 && fabs(p.migrate_ns - t->migrate) < 1,
			   "%s: saved %.1f want %.1f, migrate %.1f", t->name, p.saved_ns, t->saved,
			   p.migrate_ns);
	}
}

/* (d) a wait moved later: shorter by the host work, exit latency of the new length. */
struct wait_case {
	const char *name;
	struct ffm_price_wait w;
	int err;
	double saved, exit;
};

#define LOGF(a, b, x) (log((double)(x) / (a)) / log((double)(b) / (a)))

static const struct wait_case wait_cases[] = {
	{ "spin 1 ms moved 0.35 ms: exit is flat", { 100, 1e6, 350e3, FFM_SCHED_SPIN }, 0,
	  100 * 350e3, 0 },
	{ "blocking 1 ms moved 0.35 ms: the long wait's later exit is saved too",
	  { 100, 1e6, 350e3, FFM_SCHED_BLOCKING }, 0,
	  100 * (350e3 + 60e3 - (10e3 + 50e3 * LOGF(1e5, 1e6, 650e3))),
	  100 * (60e3 - (10e3 + 50e3 * LOGF(1e5, 1e6, 650e3))) },
	{ "yield 5 ms moved past all of it", { 3, 5e6, 10e6, FFM_SCHED_YIELD }, 0,
	  3 * (5e6 + 8e3 - 3e3), 3 * 5e3 },
	{ "blocking 20 us moved 10 us: below the measured range", { 7, 20e3, 10e3,
	  FFM_SCHED_BLOCKING }, 0, 7 * 10e3, 0 },
	{ "blocking 8 ms moved 3 ms: above the range", { 1, 8e6, 3e6, FFM_SCHED_BLOCKING }, 0,
	  3e6, 0 },
	{ "yield 300 us moved 200 us", { 10, 300e3, 200e3, FFM_SCHED_YIELD }, 0,
	  10 * (200e3 + (4e3 + 2e3 * LOGF(1e5, 1e6, 300e3)) - 4e3),
	  10 * 2e3 * LOGF(1e5, 1e6, 300e3) },
	{ "unknown mode", { 1, 1e6, 1e5, FFM_SCHED_MODES }, -EINVAL, 0, 0 },
	{ "negative move", { 1, 1e6, -1, FFM_SCHED_SPIN }, -EINVAL, 0, 0 },
};

TEST(price_move_wait_table)
{
	struct ffm_node_model nm;
	struct ffm_price p;

	node(&nm);
	for (size_t i = 0; i < sizeof(wait_cases) / sizeof(wait_cases[0]); i++) {
		const struct wait_case *t = &wait_cases[i];
		int err = ffm_price__move_wait(&nm, &t->w, &p);

		ASSERT_MSG(err == t->err, "%s: err %d", t->name, err);
		if (err)
			continue;
		ASSERT_MSG(fabs(p.saved_ns - t->saved) < 1 && fabs(p.exit_ns - t->exit) < 1,
			   "%s: saved %.1f want %.1f, exit %.1f want %.1f", t->name, p.saved_ns,
			   t->saved, p.exit_ns, t->exit);
	}
	ASSERT_EQ(ffm_price__move_wait(NULL, &wait_cases[0].w, &p), -ENODATA);
}

/* (e) a read the next GPU step may need: 0 in the headline, priced conditionally. */
struct read_case {
	const char *name;
	struct ffm_price_call c;
	uint32_t every_n;
	int err;
	double conditional;
};

static const struct read_case read_cases[] = {
	{ "pinned 4 KiB read, recorded, every 10th",
	  CALL(COPY, D2H, PINNED, 4 * KiB, 1000, 40e3, 30e3, SPIN, 0, 0, -1), 10, 0,
	  1000 * 40e3 * 0.9 },
	{ "pageable 16 MiB read, modeled, every 4th",
	  CALL(COPY, D2H, PAGEABLE, 16 * MiB, 8, -1, 0, YIELD, 0, 0, -1), 4, 0,
	  8 * 4e6 * 0.75 },
	{ "a blocking sync before the read, every 2nd",
	  CALL(SYNC, D2H, PINNED, 0, 30, 2e6, 1.95e6, BLOCKING, 0, 0, -1), 2, 0, 30 * 2e6 * 0.5 },
	{ "managed 64 KiB read, modeled", CALL(COPY, D2H, MANAGED, 64 * KiB, 100, -1, 0, SPIN, 0,
	  0, -1), 5, 0, 100 * 20e3 * 0.8 },
	{ "every 1st is no change", CALL(COPY, D2H, PINNED, 4 * KiB, 1, 40e3, 0, SPIN, 0, 0, -1),
	  1, -EINVAL, 0 },
};

TEST(price_required_read_table)
{
	struct ffm_node_model nm;
	char text[160];

	node(&nm);
	for (size_t i = 0; i < sizeof(read_cases) / sizeof(read_cases[0]); i++) {
		const struct read_case *t = &read_cases[i];
		struct ffm_price p;
		int err = ffm_price__required_read(&nm, &t->c, t->every_n, &p);

		ASSERT_MSG(err == t->err, "%s: err %d", t->name, err);
		if (err)
			continue;
		ASSERT_MSG(p.saved_ns == 0, "%s: a required read enters the headline", t->name);
		ASSERT_MSG(fabs(p.conditional_ns - t->conditional) < 1 && p.every_n == t->every_n,
			   "%s: conditional %.1f want %.1f", t->name, p.conditional_ns,
			   t->conditional);
	}
	{
		struct ffm_price p;

		ASSERT_OK(ffm_price__required_read(&nm, &read_cases[0].c, 10, &p));
		ASSERT_OK(ffm_price__conditional_text(text, sizeof(text), "loop.c:42", &p));
		ASSERT_STREQ(text, "if the value used at loop.c:42 can wait, reading it every 10 "
				   "iterations saves 0.036 s");
		ASSERT_EQ(ffm_price__conditional_text(text, 20, "loop.c:42", &p), -ENOSPC);
	}
}

TEST(node_model_lines)
{
	struct ffm_node_model nm;

	ffm_node_model__init(&nm);
	ASSERT_EQ(ffm_node_model__complete(&nm), -ENODATA);
	ASSERT_OK(ffm_node_model__parse_line(&nm, "COPY h2d pinned 65536 15000"));
	/* Sizes and lengths ascend; nothing unknown, negative or absurd is taken. */
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "COPY h2d pinned 4096 15000"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "COPY h2d fancy 65536 15000"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "COPY up pinned 65536 15000"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "COPY h2d pinned 65536 -3"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "COPY h2d pinned 65536 1e300"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "MIGRATE to_device 3000 2 100"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "MIGRATE sideways 4096 2 100"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "FAULTS to_host 16 17"), -EINVAL); /* > pages */
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "FAULTS to_host 16 0"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "FAULTS to_device 16 1"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "EXIT spinning 20000 5"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "HELLO"), -EINVAL);
	ASSERT_EQ(ffm_node_model__parse_line(&nm, "GPU "), -EINVAL);
	/* Only the pinned figure: the pageable staging cannot be priced. */
	ASSERT(ffm_node_model__staging_ns(&nm, FFM_COPY_H2D, 65536) < 0);
	ASSERT_NEAR(ffm_node_model__copy_ns(&nm, FFM_COPY_H2D, FFM_MEM_PINNED, 131072), 30000, 1);
	ASSERT(ffm_node_model__exit_ns(&nm, FFM_SCHED_SPIN, 1000) == -1);
}

TEST(node_model_json_round_trip)
{
	struct ffm_node_model nm, back;
	json_t *v;

	node(&nm);
	v = ffm_node_model__to_json(&nm);
	ASSERT(v);
	ASSERT_OK(ffm_node_model__from_json(v, &back));
	ASSERT_STREQ(back.gpu, nm.gpu);
	ASSERT_EQ(back.nsizes, nm.nsizes);
	ASSERT_EQ(back.nwaits, nm.nwaits);
	ASSERT_NEAR(back.to_host_ns_per_page, 2000, 0.1);
	ASSERT_NEAR(back.host_pages_per_fault, 16, 0.01);
	ASSERT_NEAR(ffm_node_model__copy_ns(&back, FFM_COPY_D2H, FFM_MEM_MANAGED, 1 * MiB), 90000, 1);
	ASSERT_NEAR(ffm_node_model__exit_ns(&back, FFM_SCHED_BLOCKING, 5000000), 90000, 1);
	ASSERT_OK(ffm_node_model__complete(&back));
	/* Another version is measured again, never read as this one. */
	json_object_set_new(v, "version", json_integer(FFM_NODE_MODEL_VERSION + 1));
	ASSERT_EQ(ffm_node_model__from_json(v, &back), -ESTALE);
	json_object_set_new(v, "version", json_integer(FFM_NODE_MODEL_VERSION));
	/* a model cached before the faults were counted: 1 page a fault, as before */
	json_object_del(json_object_get(v, "migration"), "host_pages_per_fault");
	ASSERT_OK(ffm_node_model__from_json(v, &back));
	ASSERT_EQ(back.host_pages_per_fault, 0);
	json_object_set_new(json_object_get(v, "migration"), "host_pages_per_fault", json_real(0.5));
	ASSERT_EQ(ffm_node_model__from_json(v, &back), -EINVAL);
	json_object_set_new(v, "gpu", json_string(""));
	ASSERT_EQ(ffm_node_model__from_json(v, &back), -EINVAL);
	json_decref(v);
}

TEST_MAIN()
