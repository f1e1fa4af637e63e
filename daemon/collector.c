/* SPDX-License-Identifier: MIT */
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "bpf/ffm.skel.h"
#include "daemon/collector.h"

_Static_assert(sizeof(struct ffm_rec_hdr) == 32, "ffm_rec_hdr layout");
_Static_assert(sizeof(struct ffm_rec_wait) == 32 + 32, "ffm_rec_wait layout");
_Static_assert(sizeof(struct ffm_rec_call) == 32 + 80, "ffm_rec_call layout");
_Static_assert(sizeof(struct ffm_rec_stack) == 32 + 56 + 8 * FFM_LIB_FRAMES + FFM_STACK_BYTES,
	       "ffm_rec_stack layout");
_Static_assert(sizeof(struct ffm_rec_proc) == 32 + 40, "ffm_rec_proc layout");
_Static_assert(sizeof(struct ffm_slots) == 8 + 4 * FFM_LEARNED_SLOTS, "ffm_slots layout");

struct ffm_collector {
	struct ffm_bpf *skel;
	struct ring_buffer *rb;
	ffm_record_fn on_record;
	void *ctx;
	int ncpus;
};

struct ffm_attachment {
	size_t n;
	struct bpf_link *links[];
};

size_t ffm_rec_size(uint32_t type)
{
	switch (type) {
	case FFM_REC_WAIT: return sizeof(struct ffm_rec_wait);
	case FFM_REC_CALL: return sizeof(struct ffm_rec_call);
	case FFM_REC_STACK: return sizeof(struct ffm_rec_stack);
	case FFM_REC_EXEC:
	case FFM_REC_EXIT:
	case FFM_REC_FORK: return sizeof(struct ffm_rec_proc);
	default: return 0;
	}
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct ffm_collector *c = ctx;
	const struct ffm_rec_hdr *h = data;
	size_t want;

	if (size < sizeof(*h))
		return 0;
	want = ffm_rec_size(h->type);
	if (!want || size < want)
		return 0; /* not ours or truncated: ignore rather than misread */
	return c->on_record ? c->on_record(c->ctx, data, size) : 0;
}

int ffm_collector__open(const struct ffm_collector_opts *opts, struct ffm_collector **ret)
{
	struct ffm_collector *c;
	int err;

	*ret = NULL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->on_record = opts ? opts->on_record : NULL;
	c->ctx = opts ? opts->ctx : NULL;
	c->ncpus = libbpf_num_possible_cpus();
	if (c->ncpus <= 0) {
		err = c->ncpus ? c->ncpus : -EINVAL;
		goto fail;
	}

	c->skel = ffm_bpf__open();
	if (!c->skel) {
		err = -errno;
		goto fail;
	}
	if (opts && opts->wakeup_bytes)
		c->skel->rodata->ringbuf_wakeup_bytes = opts->wakeup_bytes;
	if (opts && opts->ringbuf_bytes) {
		uint32_t b = opts->ringbuf_bytes;

		if (b < FFM_RINGBUF_MIN_BYTES || (b & (b - 1))) {
			err = -EINVAL;
			goto fail;
		}
		/* A wake-up threshold at or above this size never fires: the consumer then
		 * relies on its own polling (ffmd: every 100 ms). */
		err = bpf_map__set_max_entries(c->skel->maps.events, b);
		if (err)
			goto fail;
	}
	err = ffm_bpf__load(c->skel);
	if (err)
		goto fail;
	/* Only the process tracepoints auto-attach; uprobes go per driver file. */
	c->skel->links.on_exec = bpf_program__attach(c->skel->progs.on_exec);
	if (!c->skel->links.on_exec) {
		err = -errno;
		goto fail;
	}
	c->skel->links.on_fork = bpf_program__attach(c->skel->progs.on_fork);
	if (!c->skel->links.on_fork) {
		err = -errno;
		goto fail;
	}
	c->skel->links.on_exit = bpf_program__attach(c->skel->progs.on_exit);
	if (!c->skel->links.on_exit) {
		err = -errno;
		goto fail;
	}
	c->rb = ring_buffer__new(bpf_map__fd(c->skel->maps.events), on_sample, c, NULL);
	if (!c->rb) {
		err = -errno;
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	ffm_collector__free(c);
	return err < 0 ? err : -EINVAL;
}

struct ffm_collector *ffm_collector__free(struct ffm_collector *c)
{
	if (!c)
		return NULL;
	ring_buffer__free(c->rb);
	ffm_bpf__destroy(c->skel);
	free(c);
	return NULL;
}

int ffm_collector__fd(const struct ffm_collector *c)
{
	return ring_buffer__epoll_fd(c->rb);
}

int ffm_collector__consume(struct ffm_collector *c)
{
	int n = ring_buffer__consume(c->rb);

	return n < 0 ? n : n;
}

int ffm_collector__attach(struct ffm_collector *c, const char *path, const struct ffm_probe *probes,
			  size_t n, struct ffm_attachment **ret)
{
	struct ffm_attachment *a;
	int err = 0;

	*ret = NULL;
	a = calloc(1, sizeof(*a) + 2 * n * sizeof(a->links[0]));
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		for (int r = 0; r < 2; r++) {
			LIBBPF_OPTS(bpf_uprobe_opts, uo, .bpf_cookie = probes[i].cookie,
				    .retprobe = r == 1);
			struct bpf_program *prog;
			struct bpf_link *l;

			if (probes[i].wait)
				prog = r ? c->skel->progs.wait_exit : c->skel->progs.wait_entry;
			else
				prog = r ? c->skel->progs.api_exit : c->skel->progs.api_entry;
			l = bpf_program__attach_uprobe_opts(prog, -1, path, probes[i].offset, &uo);
			if (!l) {
				err = -errno;
				ffm_attachment__free(a);
				return err ? err : -EINVAL;
			}
			a->links[a->n++] = l;
		}
	}
	*ret = a;
	return 0;
}

struct ffm_attachment *ffm_attachment__free(struct ffm_attachment *a)
{
	if (!a)
		return NULL;
	/* Return probes go first: a thread inside a call then finds no return record to
	 * make, rather than an entry without its return being counted as lost. */
	for (size_t i = a->n; i-- > 0;)
		bpf_link__destroy(a->links[i]);
	free(a);
	return NULL;
}

size_t ffm_attachment__count(const struct ffm_attachment *a)
{
	return a ? a->n / 2 : 0;
}

int ffm_collector__set_job(struct ffm_collector *c, uint32_t slot, const struct ffm_job_cfg *cfg)
{
	if (slot >= FFM_MAX_JOBS)
		return -EINVAL;
	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.jobs), &slot, cfg, BPF_ANY) ? -errno : 0;
}

int ffm_collector__track_pid(struct ffm_collector *c, pid_t pid, uint32_t slot)
{
	struct ffm_proc p = { .job = slot };
	uint32_t tgid = pid;

	if (slot >= FFM_MAX_JOBS || pid <= 0)
		return -EINVAL;
	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.procs), &tgid, &p, BPF_ANY) ? -errno : 0;
}

int ffm_collector__untrack_pid(struct ffm_collector *c, pid_t pid)
{
	uint32_t tgid = pid;

	return bpf_map_delete_elem(bpf_map__fd(c->skel->maps.procs), &tgid) ? -errno : 0;
}

int ffm_collector__move_pid(struct ffm_collector *c, pid_t pid, uint32_t slot)
{
	int fd = bpf_map__fd(c->skel->maps.procs);
	uint32_t tgid = pid;
	struct ffm_proc p;

	if (slot >= FFM_MAX_JOBS || pid <= 0)
		return -EINVAL;
	if (bpf_map_lookup_elem(fd, &tgid, &p))
		return -errno;
	p.job = slot;
	/* BPF_EXIST: if the exit tracepoint deleted the entry meanwhile, fail instead of
	 * leaving an entry no exit will ever remove. */
	return bpf_map_update_elem(fd, &tgid, &p, BPF_EXIST) ? -errno : 0;
}

int ffm_collector__job_pids(struct ffm_collector *c, uint32_t slot, pid_t *pids, int max)
{
	int fd = bpf_map__fd(c->skel->maps.procs), n = 0;
	uint32_t key, next, *prev = NULL;
	struct ffm_proc p;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		prev = &key;
		if (bpf_map_lookup_elem(fd, &key, &p) == 0 && p.job == slot && n < max)
			pids[n++] = (pid_t)key;
	}
	return n;
}

static int rule_map(struct ffm_collector *c, const struct ffm_rule *r, void *key, size_t keysz)
{
	switch (r->type) {
	case FFM_RULE_UID: {
		uint32_t uid = (uint32_t)r->id;

		memcpy(key, &uid, sizeof(uid));
		return bpf_map__fd(c->skel->maps.uid_rules);
	}
	case FFM_RULE_CGROUP:
		memcpy(key, &r->id, sizeof(r->id));
		return bpf_map__fd(c->skel->maps.cgroup_rules);
	case FFM_RULE_EXE: {
		/* The kernel keeps s_dev as MKDEV(major, minor) = major << 20 | minor. */
		struct ffm_exe_key ek = {
			.dev = ((uint64_t)major(r->dev) << 20) | minor(r->dev),
			.ino = r->ino,
		};

		memcpy(key, &ek, sizeof(ek));
		return bpf_map__fd(c->skel->maps.exe_rules);
	}
	}
	return -EINVAL;
}

int ffm_collector__add_rule(struct ffm_collector *c, const struct ffm_rule *r, uint32_t slot)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));

	if (fd < 0)
		return fd;
	if (slot >= FFM_MAX_JOBS)
		return -EINVAL;
	return bpf_map_update_elem(fd, key, &slot, BPF_ANY) ? -errno : 0;
}

int ffm_collector__del_rule(struct ffm_collector *c, const struct ffm_rule *r)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));

	if (fd < 0)
		return fd;
	return bpf_map_delete_elem(fd, key) && errno != ENOENT ? -errno : 0;
}

int ffm_collector__rule_slot(struct ffm_collector *c, const struct ffm_rule *r)
{
	uint8_t key[sizeof(struct ffm_exe_key)] = {};
	int fd = rule_map(c, r, key, sizeof(key));
	uint32_t slot;

	if (fd < 0)
		return fd;
	return bpf_map_lookup_elem(fd, key, &slot) ? -errno : (int)slot;
}

int ffm_collector__drops(struct ffm_collector *c, uint32_t slot, struct ffm_rec_drops *out)
{
	struct ffm_rec_drops *percpu;
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (slot > FFM_MAX_JOBS)
		return -EINVAL;
	percpu = calloc(c->ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	if (bpf_map_lookup_elem(bpf_map__fd(c->skel->maps.drops), &slot, percpu)) {
		err = -errno;
	} else {
		for (int i = 0; i < c->ncpus; i++)
			for (int r = 0; r < FFM_REC_DROP__MAX; r++)
				out->n[r] += percpu[i].n[r];
	}
	free(percpu);
	return err;
}

int ffm_collector__clear_drops(struct ffm_collector *c, uint32_t slot)
{
	struct ffm_rec_drops *percpu;
	int err = 0;

	if (slot > FFM_MAX_JOBS)
		return -EINVAL;
	percpu = calloc(c->ncpus, sizeof(*percpu));
	if (!percpu)
		return -ENOMEM;
	if (bpf_map_update_elem(bpf_map__fd(c->skel->maps.drops), &slot, percpu, BPF_ANY))
		err = -errno;
	free(percpu);
	return err;
}

int ffm_collector__learn_slots(struct ffm_collector *c, uint32_t tgid, uint64_t callsite,
			       const int32_t *off, uint32_t n)
{
	struct ffm_slot_key k = { .tgid = tgid, .callsite = callsite };
	struct ffm_slots s = {};

	if (n > FFM_LEARNED_SLOTS)
		n = FFM_LEARNED_SLOTS;
	s.n = n;
	memcpy(s.off, off, n * sizeof(*off));
	return bpf_map_update_elem(bpf_map__fd(c->skel->maps.slots), &k, &s, BPF_NOEXIST) &&
			       errno != EEXIST ?
		       -errno :
		       0;
}

void ffm_collector__forget_process(struct ffm_collector *c, uint32_t tgid)
{
	int fd = bpf_map__fd(c->skel->maps.slots);
	struct ffm_slot_key key, next, *prev = NULL;

	while (bpf_map_get_next_key(fd, prev, &next) == 0) {
		key = next;
		if (key.tgid == tgid) {
			/* Deleting the current key restarts iteration from the start. */
			bpf_map_delete_elem(fd, &key);
			prev = NULL;
			continue;
		}
		prev = &key;
	}
}
