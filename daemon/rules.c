/* SPDX-License-Identifier: MIT */
/*
 * Config rules ([rule NAME] sections) and the jobs they make.
 *
 * The BPF side knows FFM_MAX_JOBS slots; a slot is either a job's (started by request, by a
 * rule, or resumed after a restart) or a rule's. A [rule NAME] owns one slot for as long as it
 * is configured: its selectors sit in the BPF rule maps with that slot, so at exec BPF puts a
 * matching process into the rule's slot, with no window in which a call could be missed. When
 * ffmd reads that EXEC record it makes the process a job of its own ("<rule>-<pid>-<start time
 * in clock ticks since boot>", key: the rule's, else ffm_job_key of uid + executable +
 * arguments, stage: the rule's override or the key's plan), gives the job a free slot and
 * moves the process there (ffm_collector__move_pid, which keeps what BPF learned about it).
 * Records that BPF wrote before the move carry the rule's slot: they are routed by tgid (a fork
 * in that window by the parent's tgid) to the new job, in ring buffer order, so nothing is lost
 * or misfiled (record_job in server.c, with tables.c's routes). A rule's job ends when its last
 * process exits. A process in a rule's slot records what stage 1 records until it is moved
 * (milliseconds).
 *
 * Owns the rules table and its slots; the jobs it makes are jobs.c's like any other.
 *
 * Runs on the loop: at each EXEC record of a matched process (a job made: a store opened), and
 * at SIGHUP, where a removed rule's processes still in its slot are made jobs (at most as many
 * as there are free job slots, each a store opened).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/ffmd_int.h"
#include "daemon/jobrun.h"
#include "daemon/log.h"

static bool rule_same(const struct ffmd_rule *a, const struct ffmd_rule *b)
{
	if (strcmp(a->name, b->name) || strcmp(a->key, b->key) || a->stage != b->stage ||
	    a->nsel != b->nsel)
		return false;
	for (int i = 0; i < a->nsel; i++)
		if (a->sel[i].type != b->sel[i].type || strcmp(a->sel[i].value, b->sel[i].value))
			return false;
	return true;
}

/*
 * A process in @ru's slot: make it a job of its own and move it to the job's slot. @p: its EXEC
 * record, whose comm and argument hash make the key (NULL: found there by a scan, read from
 * /proc the same way). Returns the job's index, or -1.
 */
int rule_adopt(struct ffmd *d, struct rule *ru, uint32_t tgid, uint32_t uid,
		      const struct ffm_rec_proc *p)
{
	static struct job_spec sp;
	char id[128], key[128], comm[17] = "", args[FFM_ARGS_HASH_MAX], path[64];
	unsigned long long st = proc_start_time((pid_t)tgid);
	uint64_t ah = p ? p->args_hash : 0;
	const char *msg = "";
	struct job *j;
	ssize_t n;
	int err, fd;

	snprintf(id, sizeof(id), "%s-%u-%llu", ru->r.name, tgid, st);
	if (p) {
		snprintf(comm, sizeof(comm), "%.16s", p->comm);
	} else {
		snprintf(path, sizeof(path), "/proc/%u/comm", tgid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, comm, sizeof(comm) - 1);
			comm[n > 0 ? n : 0] = 0;
			comm[strcspn(comm, "\n")] = 0;
			close(fd);
		}
		snprintf(path, sizeof(path), "/proc/%u/cmdline", tgid);
		if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
			n = read(fd, args, sizeof(args));
			ah = n > 0 ? ffm_args_block_hash(args, (size_t)n) : 0;
			close(fd);
		}
	}
	if (ru->r.key[0])
		snprintf(key, sizeof(key), "%s", ru->r.key);
	else
		ffm_job_key_exec(uid, comm, ah, key, sizeof(key));
	sp = (struct job_spec){ .id = id, .key = key, .owner = uid, .override_stage = ru->r.stage,
				.rule = ru->r.name, .root = (pid_t)tgid, .adopted = true, .nsel = 1,
				.sel[0].type = FFM_SEL_PID };
	snprintf(sp.sel[0].value, sizeof(sp.sel[0].value), "%u", tgid);
	err = job_create(d, &sp, &j, &msg);
	if (err < 0) {
		log_err("rule %s: cannot make process %u a job: %s", ru->r.name, tgid, msg);
		return -1;
	}
	ru->jobs_made++;
	return (int)(j - d->jobs);
}

/* Take every process still in @ru's slot (records of them may be in flight too). */
static void rule_adopt_waiting(struct ffmd *d, struct rule *ru)
{
	pid_t pids[1024];
	int n = ffm_collector__job_pids(d->col, ru->slot, pids, 1024);

	for (int i = 0; i < n; i++) {
		char path[64];
		struct stat st;
		int job = route_find(d, (uint32_t)pids[i]);

		if (job < 0) {
			snprintf(path, sizeof(path), "/proc/%d", pids[i]);
			job = rule_adopt(d, ru, (uint32_t)pids[i], stat(path, &st) == 0 ? st.st_uid : 0, NULL);
			if (job < 0)
				continue;
			route_add(d, (uint32_t)pids[i], job);
		}
		ffm_collector__move_pid(d->col, pids[i], d->jobs[job].slot);
	}
}

static int rule_install(struct ffmd *d, const struct ffmd_rule *r, struct rule *ru)
{
	struct ffm_job_cfg cfg = { .flags = FFM_JOB_ACTIVE | FFM_JOB_STACKS | FFM_JOB_RULE, .stage = 1 };
	int slot = job_slot_free(d), err = 0, k, cur;

	if (slot < 0) {
		log_err("rule %s: no free job slot (%d in use)", r->name, FFM_MAX_JOBS);
		return -ENOSPC;
	}
	memset(ru, 0, sizeof(*ru));
	ru->r = *r;
	ru->slot = (uint32_t)slot;
	for (k = 0; k < r->nsel; k++) {
		struct ffm_rule br;

		err = selector_rule(&r->sel[k], &br);
		if (err <= 0) {
			log_err("rule %s: %s %s: %s", r->name, ffm_selector_name(r->sel[k].type), r->sel[k].value,
				err ? strerror(-err) : "not a rule selector");
			err = err ? err : -EINVAL;
			break;
		}
		cur = ffm_collector__rule_slot(d->col, &br);
		if (cur >= 0 && d->jobs[cur].used)
			continue; /* a job by request has it: it passes to us when that ends */
		err = ffm_collector__add_rule(d->col, &br, ru->slot);
		if (err < 0) {
			log_err("rule %s: cannot add selector %s: %s", r->name, r->sel[k].value, strerror(-err));
			break;
		}
	}
	if (err < 0) {
		selectors_drop(d, r->sel, k, ru->slot);
		return err;
	}
	ffm_collector__clear_drops(d->col, ru->slot);
	ffm_collector__set_job(d->col, ru->slot, &cfg);
	ru->used = true;
	d->rule_slots |= 1ull << ru->slot;
	log_info("rule %s: %d selector%s, slot %u", r->name, r->nsel, r->nsel == 1 ? "" : "s", ru->slot);
	return 0;
}

/* Stop @ru matching; processes already in its slot become jobs as usual; free the slot. */
static void rule_remove(struct ffmd *d, struct rule *ru)
{
	struct ffm_job_cfg off = {};

	ru->used = false; /* out of selectors_resync's sight */
	selectors_drop(d, ru->r.sel, ru->r.nsel, ru->slot);
	ru->used = true;
	ffm_collector__drain(d->col); /* all sent until now, however much is in front */
	rule_adopt_waiting(d, ru);
	ffm_collector__set_job(d->col, ru->slot, &off);
	d->rule_slots &= ~(1ull << ru->slot);
	ru->used = false;
	log_info("rule %s removed", ru->r.name);
}

/*
 * Rules: unchanged ones keep their slot; the others are removed first (their selectors may
 * move to a new rule), then the new ones installed. d->cfg's rules become those in use.
 * -errno if a rule could not be installed.
 */
int rules_reload(struct ffmd *d, const struct ffmd_config *cfg)
{
	struct rule keep[FFM_MAX_RULES];
	bool kept_new[FFM_MAX_RULES] = {};
	int err = 0, nkeep = 0;

	for (int i = 0; i < FFM_MAX_RULES; i++) {
		struct rule *ru = &d->rules[i];
		int k;

		if (!ru->used)
			continue;
		for (k = 0; k < cfg->nrules; k++)
			if (!kept_new[k] && rule_same(&ru->r, &cfg->rules[k]))
				break;
		if (k < cfg->nrules) {
			kept_new[k] = true;
			keep[nkeep++] = *ru;
		} else {
			rule_remove(d, ru);
		}
	}
	memset(d->rules, 0, sizeof(d->rules));
	for (int i = 0; i < nkeep; i++)
		d->rules[i] = keep[i];
	for (int k = 0; k < cfg->nrules; k++) {
		int r;

		if (kept_new[k])
			continue;
		if (nkeep == FFM_MAX_RULES) {
			err = -ENOSPC;
			break;
		}
		r = rule_install(d, &cfg->rules[k], &d->rules[nkeep]);
		if (r < 0)
			err = r;
		else
			nkeep++;
	}
	d->cfg.nrules = 0;
	for (int i = 0; i < nkeep; i++)
		d->cfg.rules[d->cfg.nrules++] = d->rules[i].r;
	return err;
}
