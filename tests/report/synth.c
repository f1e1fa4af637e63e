/* SPDX-License-Identifier: MIT */
/* Synthetic stores with known answers (see synth.h). */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "analysis/ffm_verdict.h"
#include "store/ffm_store.h"
#include "tests/report/synth.h"

#define US 1000ull
#define DRIVER "/usr/lib/x86_64-linux-gnu/libcuda.so.1"
#define DRIVER_BID "c0dac0dac0dac0dac0dac0dac0dac0dac0dac0da"
#define APP "/opt/app/bin/app"
#define APP_BID "a11a11a11a11a11a11a11a11a11a11a11a11a11a"
#define WAIT_OFF 0x22bb00

enum api { A_LAUNCH = 1, A_SYNC, A_DTOH, A_HTOD, A__MAX };

static const char *const api_names[A__MAX] = {
	[A_LAUNCH] = "cuLaunchKernel", [A_SYNC] = "cuCtxSynchronize",
	[A_DTOH] = "cuMemcpyDtoHAsync", [A_HTOD] = "cuMemcpyHtoD",
};
static const uint32_t api_kind[A__MAX] = {
	[A_LAUNCH] = FFM_EV_LAUNCH, [A_SYNC] = FFM_EV_API,
	[A_DTOH] = FFM_EV_TRANSFER, [A_HTOD] = FFM_EV_TRANSFER,
};

/* A call site: the API it calls and the application frame that calls it. */
struct site {
	enum api api;
	const char *func;
	uint32_t line;
	uint64_t off;
};

/* Sites per scenario; use sites (first access of the copied data) separately. */
static const struct site sites[SYN__MAX][4] = {
	[SYN_UNNECESSARY] = { { A_LAUNCH, "step_unnecessary", 10, 0x1110 },
			      { A_SYNC, "step_unnecessary", 11, 0x1120 } },
	[SYN_MISPLACED] = { { A_LAUNCH, "step_misplaced", 20, 0x1210 },
			    { A_DTOH, "step_misplaced", 21, 0x1220 },
			    { A_SYNC, "step_misplaced", 22, 0x1230 } },
	[SYN_DUP] = { { A_HTOD, "step_dup", 30, 0x1310 }, { A_LAUNCH, "step_dup", 31, 0x1320 },
		      { A_SYNC, "step_dup", 32, 0x1330 } },
	[SYN_CONTROL] = { { A_LAUNCH, "step_control", 40, 0x1410 },
			  { A_SYNC, "step_control", 41, 0x1420 } },
	[SYN_SEQUENCE] = { { A_LAUNCH, "seq_launch", 50, 0x1510 },
			   { A_SYNC, "seq_first", 51, 0x1520 },
			   { A_SYNC, "seq_second", 52, 0x1530 },
			   { A_SYNC, "seq_required", 53, 0x1540 } },
	[SYN_HOST_READ] = { { A_LAUNCH, "step_read", 60, 0x1610 },
			    { A_DTOH, "step_read", 61, 0x1620 },
			    { A_SYNC, "step_read", 61, 0x1630 } },
};
static const struct site use_site[SYN__MAX] = {
	[SYN_MISPLACED] = { 0, "step_misplaced", 24, 0x1240 },
	[SYN_DUP] = { 0, "step_dup", 33, 0x1340 },
	[SYN_CONTROL] = { 0, "step_control", 42, 0x1440 },
	[SYN_SEQUENCE] = { 0, "seq_required", 54, 0x1550 },
	[SYN_HOST_READ] = { 0, "step_read", 62, 0x1640 },
};

#define READ_CALL_CPU (20 * US) /* HOST_READ: the sync call's CPU time outside its wait */

/* The API a site calls: the table's, or UNNECESSARY's sync made an async copy (copy_us). */
static enum api site_api(const struct synth_opts *o, int sc, int si)
{
	return o->copy_us && sc == SYN_UNNECESSARY && si == 1 ? A_DTOH : sites[sc][si].api;
}

uint32_t synth__line(enum synth_scenario s)
{
	static const uint32_t planted[SYN__MAX] = { 11, 22, 30, 41, 51, 61 };

	return s < SYN__MAX ? planted[s] : 0;
}

struct params {
	uint64_t l, k, c, t, k2, c2, use;
};

static struct params params_of(const struct synth_opts *o)
{
	return (struct params){
		.l = (o->l_us ? o->l_us : 10) * US, .k = (o->k_us ? o->k_us : 500) * US,
		.c = (o->c_us ? o->c_us : 1000) * US, .t = (o->t_us ? o->t_us : 300) * US,
		.k2 = (o->k2_us ? o->k2_us : 400) * US, .c2 = (o->c2_us ? o->c2_us : 800) * US,
		.use = (o->use_us ? o->use_us : 2) * US,
	};
}

static uint64_t min64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

uint64_t synth__expected(const struct synth_opts *o, enum synth_scenario s)
{
	struct params p = params_of(o);
	uint64_t n = o->iters;

	if (s >= SYN__MAX || !(o->scenarios & (1u << s)))
		return 0;
	switch (s) {
	case SYN_UNNECESSARY:
		/* idle after each sync: C (+ the next launch's L), the last: C to the run's end */
		return n * min64(p.k, p.c);
	case SYN_MISPLACED: return n * min64(p.c, p.k);
	case SYN_DUP: return n ? (n - 1) * p.t : 0;
	case SYN_SEQUENCE: {
		/* A: idle C before B; the rest carries into B, which is removed too: idle C2
		 * before the required sync R absorbs what it can. */
		uint64_t a = min64(p.k, p.c), carry = p.k - a, b = min64(p.k2 + carry, p.c2);

		return n * (a + b);
	}
	case SYN_HOST_READ:
		/* every FFM_HOST_READ_EVERY-th read stays; the others go with their calls */
		return (n - n / FFM_HOST_READ_EVERY) * min64(p.c + 2 * p.l, p.k + READ_CALL_CPU + p.l);
	default: return 0;
	}
}

/* ---- writing -------------------------------------------------------------------------------- */

struct ctx {
	const struct synth_opts *o;
	struct params p;
	struct ffm_store *s;
	int64_t frames_app[SYN__MAX][4], frame_use[SYN__MAX], frame_main;
	int64_t frames_api[A__MAX], frame_wait;
	int64_t stack[SYN__MAX][4], wait_stack[SYN__MAX][4], use_stack[SYN__MAX];
	int64_t run;
	int stage;
	uint64_t occ; /* sync occurrences at the UNNECESSARY site, for s3_missing */
	uint64_t uocc; /* ... for seen_uses */
	uint64_t mocc; /* MISPLACED syncs written, for misplaced_unseen */
	int64_t first_dup_event;
	uint64_t fake_event;
	uint64_t probe_acc; /* the thread's probe cost so far (synth_opts.probe_us) */
	uint64_t base_shift; /* stage 1: how much later its records end than the timeline's */
	uint64_t base_waits; /* stage 1: its wait records so far */
};

static int frame(struct ctx *c, const char *bid, const char *module, uint64_t off,
		 const char *func, uint32_t line, int64_t *id)
{
	struct ffm_store_frame f = {
		.build_id = bid, .module = module, .offset = off, .func = func, .demangled = func,
		.folded = func, .file = line ? "app.c" : NULL, .line = line,
	};

	return ffm_store__put_frame(c->s, &f, id);
}

static int setup_stacks(struct ctx *c)
{
	int err = frame(c, APP_BID, APP, 0x1000, "main", 5, &c->frame_main);

	err = err ? err : frame(c, DRIVER_BID, DRIVER, WAIT_OFF, NULL, 0, &c->frame_wait);
	for (int a = 1; a < A__MAX && !err; a++) {
		err = frame(c, DRIVER_BID, DRIVER, 0x100000 + 0x100 * a, api_names[a], 0,
			    &c->frames_api[a]);
		if (!err)
			err = ffm_store__put_api_name(c->s, (uint32_t)a,
						      a != A_SYNC	   ? api_names[a]
						      : c->o->sync_api	   ? c->o->sync_api
						      : c->o->stream_sync ? "cuStreamSynchronize"
									   : api_names[a]);
	}
	for (int sc = 0; sc < SYN__MAX && !err; sc++) {
		for (int i = 0; i < 4 && sites[sc][i].func && !err; i++) {
			const struct site *st = &sites[sc][i];
			struct ffm_store_frame fr[4] = {
				{ .build_id = DRIVER_BID, .module = DRIVER,
				  .offset = 0x100000 + 0x100 * site_api(c->o, sc, i) },
				{ .build_id = APP_BID, .module = APP, .offset = st->off, .func = st->func,
				  .demangled = st->func, .folded = st->func, .file = "app.c", .line = st->line },
				{ .build_id = APP_BID, .module = APP, .offset = 0x1000, .func = "main",
				  .demangled = "main", .folded = "main", .file = "app.c", .line = 5 },
			};
			struct ffm_store_frame wf[4] = {
				{ .build_id = DRIVER_BID, .module = DRIVER, .offset = WAIT_OFF }, fr[0], fr[1],
				fr[2],
			};

			err = frame(c, APP_BID, APP, st->off, st->func, st->line, &c->frames_app[sc][i]);
			if (!err)
				err = ffm_store__put_stack(c->s, 0x5000 + sc * 16 + i, fr, 3,
							   &c->stack[sc][i]);
			if (err >= 0)
				err = ffm_store__put_stack(c->s, 0x9000 + sc * 16 + i, wf, 4,
							   &c->wait_stack[sc][i]);
			err = err < 0 ? err : 0;
		}
		if (!err && use_site[sc].func) {
			const struct site *u = &use_site[sc];
			struct ffm_store_frame fr[2] = {
				{ .build_id = APP_BID, .module = APP, .offset = u->off, .func = u->func,
				  .demangled = u->func, .folded = u->func, .file = "app.c", .line = u->line },
				{ .build_id = APP_BID, .module = APP, .offset = 0x1000, .func = "main",
				  .demangled = "main", .folded = "main", .file = "app.c", .line = 5 },
			};

			err = frame(c, APP_BID, APP, u->off, u->func, u->line, &c->frame_use[sc]);
			if (!err)
				err = ffm_store__put_stack(c->s, 0xd000 + sc, fr, 2, &c->use_stack[sc]);
			err = err < 0 ? err : 0;
		}
	}
	return err;
}

/* One call of the timeline: written as the run's stage records it. */
static int call(struct ctx *c, uint32_t tid, int sc, int si, uint64_t start, uint64_t dur,
		uint64_t wait, int64_t use_delay, uint32_t dup)
{
	enum api api = site_api(c->o, sc, si);
	struct ffm_store_event ev = {
		.run = c->run, .kind = api_kind[api], .api = api,
		.tgid = c->o->tgid ? c->o->tgid : 4242, .tid = tid, .start_ns = start, .dur_ns = dur,
		.wait_ns = wait, .stack = c->stack[sc][si], .bytes = api == A_HTOD ? 4 << 20 : 0,
		.dir = api == A_HTOD ? FFM_DIR_HTOD : api == A_DTOH ? FFM_DIR_DTOH : 0,
		.dst = 0x7000000 + sc,
	};
	int64_t id = 0;
	int err;

	if (c->stage == 1) {
		/* a monitoring run that times copies records them as stage 2 does */
		if (c->o->t1_us && (ev.kind == FFM_EV_TRANSFER || ev.kind == FFM_EV_MEMSET) &&
		    (err = ffm_store__put_event(c->s, &ev, NULL)))
			return err;
		if (!wait)
			return 0;
		/* stage 1 sees only the wait function, with its own (deeper) stack */
		ev.kind = FFM_EV_WAIT;
		ev.start_ns = start + dur - wait + c->base_shift;
		ev.dur_ns = wait;
		if (!c->o->base_extra_every || c->base_waits++ % c->o->base_extra_every == 0) {
			ev.dur_ns += c->o->base_extra_us * US;
			if (c->o->base_cpu_less_us < c->o->base_extra_us)
				c->base_shift += (c->o->base_extra_us - c->o->base_cpu_less_us) * US;
		}
		ev.stack = c->wait_stack[sc][si];
		return ffm_store__put_event(c->s, &ev, NULL);
	}
	ev.probe_ns = c->probe_acc;
	c->probe_acc += c->o->probe_us * US;
	if (c->stage == 2 || !c->o->fast) {
		err = ffm_store__put_event(c->s, &ev, &id);
		if (err)
			return err;
	} else {
		id = (int64_t)++c->fake_event;
	}
	if (c->stage == 2)
		return 0;
	if (api == A_SYNC || (sc == SYN_UNNECESSARY && si == 1)) {
		uint32_t bytes = sc == SYN_HOST_READ ? 4 : c->o->prot_bytes ? c->o->prot_bytes : 0x1000;
		struct ffm_store_sync_use u;

		if (sc == SYN_UNNECESSARY && c->stage == 3 && c->uocc++ < c->o->seen_uses)
			use_delay = (int64_t)(c->o->use_us ? c->o->use_us : 2) * US;
		if (sc == SYN_MISPLACED && c->o->misplaced_unseen && c->mocc++ % 2)
			use_delay = -1;
		u = (struct ffm_store_sync_use){
			.run = c->run, .event = id, .stack = ev.stack, .prot_lo = 0x10000 + sc * 0x1000,
			.prot_hi = 0x10000 + sc * 0x1000 + bytes, .use_delay_ns = use_delay,
			.flags = use_delay < 0 ? FFM_SYNC_USE_NONE : 0,
			/* one 8-byte window on the range's first word, as stage 3 had before schema 6 */
			.watched_bytes = bytes < 8 ? bytes : 8, .covered_bytes = bytes < 8 ? bytes : 8,
		};

		if (use_delay >= 0) {
			u.use_addr = u.prot_lo;
			if (sc == SYN_MISPLACED)
				u.use_frame = c->frame_use[sc];
			else
				u.use_stack = c->use_stack[sc];
		}
		if (sc == SYN_UNNECESSARY && c->occ++ < c->o->s3_missing && c->stage == 3)
			return 0;
		if ((sc == SYN_UNNECESSARY || sc == SYN_MISPLACED) && c->o->partial)
			u.flags |= FFM_SYNC_USE_PARTIAL;
		if (c->stage == 4 && use_delay < 0)
			return 0; /* stage 4 times only the syncs stage 3 found used */
		err = ffm_store__put_sync_use(c->s, &u, NULL);
		if (!err && sc == SYN_MISPLACED && c->o->rows_per_range) {
			/* a second protected range of the same sync, used later */
			u.prot_lo += 0x800;
			u.use_delay_ns = use_delay + 50 * US;
			err = ffm_store__put_sync_use(c->s, &u, NULL);
		}
		return err;
	}
	if (ev.kind == FFM_EV_TRANSFER && c->stage == 3) {
		struct ffm_store_xfer_hash h = {
			.run = c->run, .event = id, .stack = ev.stack, .hash = 0x1234 + sc,
			.dst = ev.dst, .bytes = ev.bytes, .dup = dup,
		};

		if (dup == FFM_DUP_SAME_DST) {
			h.first_event = c->first_dup_event;
			h.first_stack = ev.stack;
		} else if (sc == SYN_DUP) {
			c->first_dup_event = id;
		}
		if (sc != SYN_DUP) /* fresh content every time */
			h.hash ^= (uint64_t)id << 16;
		return ffm_store__put_xfer_hash(c->s, &h, NULL);
	}
	return 0;
}

/* The whole scenario list on one thread; returns the end time. */
static int thread_timeline(struct ctx *c, uint32_t tid, uint64_t t0, uint64_t *end)
{
	const struct params *p = &c->p;
	uint64_t t = t0;
	int err = 0;

	c->probe_acc = 0;
	c->base_shift = c->base_waits = 0;
	for (int sc = 0; sc < SYN__MAX && !err; sc++) {
		if (!(c->o->scenarios & (1u << sc)))
			continue;
		for (uint32_t i = 0; i < c->o->iters && !err; i++) {
			switch (sc) {
			case SYN_UNNECESSARY: {
				uint64_t pre = min64(c->o->pre_us * US, p->k), copy = c->o->copy_us * US;

				err = call(c, tid, sc, 0, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 1, t + pre, p->k - pre + copy, p->k - pre, -1, 0);
				t += p->k + copy + p->c;
				break;
			}
			case SYN_MISPLACED:
				err = call(c, tid, sc, 0, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 1, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 2, t, p->k, p->k, (int64_t)p->c, 0);
				t += p->k + p->c;
				break;
			case SYN_DUP: {
				uint64_t tx = c->stage == 4 && c->o->t4_us ? c->o->t4_us * US :
					      c->stage == 1 && c->o->t1_us ? c->o->t1_us * US : p->t;

				err = call(c, tid, sc, 0, t, tx, 0, -1,
					   i ? FFM_DUP_SAME_DST : FFM_DUP_NONE);
				t += tx;
				err = err ? err : call(c, tid, sc, 1, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 2, t, p->k, p->k, (int64_t)p->use, 0);
				t += p->k + p->c;
				break;
			}
			case SYN_CONTROL:
				err = call(c, tid, sc, 0, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 1, t, p->k, p->k, (int64_t)p->use, 0);
				t += p->k + p->c;
				break;
			case SYN_SEQUENCE:
				err = call(c, tid, sc, 0, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 1, t, p->k, p->k, -1, 0);
				t += p->k + p->c;
				err = err ? err : call(c, tid, sc, 2, t, p->k2, p->k2, -1, 0);
				t += p->k2 + p->c2;
				/* required: whatever was removed before lands here; measured short */
				err = err ? err : call(c, tid, sc, 3, t, 5 * US, 5 * US, (int64_t)p->use, 0);
				t += 5 * US;
				break;
			case SYN_HOST_READ: {
				uint64_t cw = c->o->read_copy_waits ? p->k : 0; /* the copy's wait */

				err = call(c, tid, sc, 0, t, p->l, 0, -1, 0);
				t += p->l;
				err = err ? err : call(c, tid, sc, 1, t, p->l + cw, cw, -1, 0);
				t += p->l + cw;
				err = err ? err : call(c, tid, sc, 2, t, p->k - cw + READ_CALL_CPU,
						       p->k - cw, (int64_t)p->use, 0);
				t += p->k - cw + READ_CALL_CPU + p->c;
				break;
			}
			}
		}
	}
	*end = t;
	return err;
}

static int write_run(struct ctx *c, int stage)
{
	const struct synth_opts *o = c->o;
	uint32_t threads = o->threads ? o->threads : 1, tgid = o->tgid ? o->tgid : 4242;
	uint64_t t0 = 1000000000ull * (10 + 100 * (uint64_t)stage), end = t0;
	int err;

	c->stage = stage;
	c->occ = 0;
	c->mocc = 0;
	err = ffm_store__run_begin(c->s, &(struct ffm_store_run){
		.job_id = o->job_id, .stage = stage, .start_ns = t0 - 1000 * US,
		.start_unix = 1700000000 + stage }, &c->run);
	if (err)
		return err;
	err = ffm_store__put_process(c->s, &(struct ffm_store_process){
		.run = c->run, .tgid = tgid, .exe = APP, .start_ns = t0 - 100 * US });
	for (uint32_t th = 0; th < threads && !err; th++) {
		uint64_t e;

		err = thread_timeline(c, tgid + th,
				      t0 + th * (c->o->stagger_us ? c->o->stagger_us * US : 7), &e);
		if (e > end)
			end = e;
	}
	if (!err && o->late_launch) {
		err = call(c, tgid, SYN_CONTROL, 0, end, c->p.l, 0, -1, 0);
		end += c->p.l;
	}
	if (err)
		return err;
	/* The process ends C after the last call of its longest thread. */
	err = ffm_store__process_exit(c->s, c->run, tgid, end + c->p.c, 0);
	if (!err)
		err = ffm_store__run_end(c->s, c->run, end + c->p.c + 100 * US,
					 (end + c->p.c - (t0 - 100 * US)) / 1e9, o->exit_status,
					 o->run_flags | (c->stage == 1 && o->t1_us ? FFM_RUN_COPIES : 0));
	return err ? err : ffm_store__flush(c->s);
}

int synth__write(const struct synth_opts *o)
{
	struct ffm_store_opts so = { .sz = sizeof(so), .create = true,
				     .batch_events = o->fast ? 1000000 : 0, .batch_ms = o->fast ? 60000 : 0 };
	struct ffm_store_key key = { .key = o->key, .uid = SYNTH_UID, .exe = APP };
	struct ctx c = { .o = o, .p = params_of(o) };
	int err;

	if (!o->state_dir || !o->key || !o->job_id || !o->iters || o->stages < 1 || o->stages > 4)
		return -EINVAL;
	err = ffm_store__open_key(o->state_dir, &key, &so, &c.s);
	if (err)
		return err;
	err = ffm_store__job_begin(c.s, &(struct ffm_store_job){
		.job_id = o->job_id, .uid = SYNTH_UID, .state = FFM_JOB_RUNNING,
		.start_unix = 1700000000, .node = o->node }, NULL);
	err = err ? err : setup_stacks(&c);
	for (uint32_t st = o->first_stage ? o->first_stage : 1; st <= o->stages && !err; st++)
		err = write_run(&c, (int)st);
	if (!err)
		err = ffm_store__job_end(c.s, o->job_id, FFM_JOB_DONE, 1700000100);
	/* As ffmd does at a job's end: the copy that readers of other nodes and the owner open
	 * (a file system without ACLs still gets the copy, for root). */
	if (!err) {
		uint32_t owner;

		err = ffm_store__publish(ffm_store__path(c.s), o->state_dir, &owner);
		if (err == -ENOTSUP)
			err = 0;
	}
	ffm_store__free(c.s);
	return err;
}
