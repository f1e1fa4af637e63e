/* SPDX-License-Identifier: MIT */
/*
 * CPython builds and frames (symbols/ffm_python.h): the offsets table, the detection of a
 * process's build, the check of its layout against the live process, and the decoding of code
 * objects (file, qualified name, line table) from /proc/PID/mem.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bpf/ffm_hash.h"
#include "common/oatab.h"
#include "symbols/elfutil.h"
#include "symbols/ffm_maps.h"
#include "symbols/ffm_python.h"
#include "symbols/useropen.h"

/*
 * Offsets per (major, minor), from the headers of release builds of that version (offsetof
 * with Py_BUILD_CORE). 3.9 and 3.10: tstate->frame, a chain of PyFrameObjects (f_back) whose
 * f_lasti is an int (bytes in 3.9, code units in 3.10); they have no co_qualname (co_name
 * stands in: a method is named "step", not "Model.step") and no data stack. 3.11 and 3.12:
 * tstate->cframe->current_frame; 3.13: tstate->current_frame. Strings: compact ASCII data
 * follows PyASCIIObject, other compact strings follow PyCompactUnicodeObject. ts_chunk,
 * ts_top: where the thread's frames are allocated (datastack_chunk, datastack_top, 3.11+),
 * which lets the walk read many frames at once.
 */
struct ffm_py_offsets {
	uint8_t major, minor;
	uint16_t rt_main;      /* _PyRuntimeState: interpreters.main */
	uint16_t is_threads;   /* PyInterpreterState: threads.head (tstate_head before 3.11) */
	uint16_t ts_next, ts_interp, ts_thread_id, ts_frame;
	uint16_t cf_frame;     /* _PyCFrame: current_frame; CFRAME only */
	uint16_t fr_code, fr_previous, fr_instr, fr_owner;
	uint8_t chain, owner_cstack, lasti_shift;
	uint8_t lines;         /* enum ffm_py_lines: the format of the line table */
	uint16_t co_code, co_filename, co_name, co_qualname, co_linetable, co_firstlineno;
	uint16_t str_ascii, str_compact; /* sizeof(PyASCIIObject), sizeof(PyCompactUnicodeObject) */
	uint16_t ts_chunk, ts_top;       /* PyThreadState: datastack_chunk, datastack_top */
};

#define PRE311(min, instr, shift, table)                                                        \
	{ .major = 3, .minor = (min), .rt_main = 40, .is_threads = 8, .ts_next = 8,             \
	  .ts_interp = 16, .ts_thread_id = 176, .ts_frame = 24, .fr_code = 32,                   \
	  .fr_previous = 24, .fr_instr = (instr), .chain = FFM_PY_CHAIN_OBJECT,                  \
	  .owner_cstack = 0xff, .lasti_shift = (shift), .lines = (table), .co_code = 48,         \
	  .co_filename = 104, .co_name = 112, .co_qualname = 112, .co_linetable = 120,            \
	  .co_firstlineno = 40, .str_ascii = 48, .str_compact = 72 }

static const struct ffm_py_offsets tables[] = {
	PRE311(9, 104, 0, FFM_PY_LINES_LNOTAB),
	PRE311(10, 96, 1, FFM_PY_LINES_LINETABLE),
	{ 3, 11, 48, 16, 8, 16, 152, 56, 8, 32, 48, 56, 69, FFM_PY_CHAIN_CFRAME, 0xff, 0,
	  FFM_PY_LINES_LOCATIONS, 184, 112, 120, 128, 136, 72, 48, 72, 296, 304 },
	{ 3, 12, 48, 72, 8, 16, 136, 56, 0, 0, 8, 56, 70, FFM_PY_CHAIN_CFRAME, 3, 0,
	  FFM_PY_LINES_LOCATIONS, 192, 112, 120, 128, 136, 68, 40, 56, 232, 240 },
	{ 3, 13, 640, 7344, 8, 16, 152, 72, 0, 0, 8, 56, 70, FFM_PY_CHAIN_CURRENT, 3, 0,
	  FFM_PY_LINES_LOCATIONS, 200, 112, 120, 128, 136, 68, 40, 56, 232, 240 },
};

#define MAX_STR 4096       /* characters of a file or function name */
#define MAX_LINETABLE 65536 /* bytes of a location table */
#define MAX_THREADS 256
#define MAX_FRAMES 64
#define CHUNK_DATA 24          /* offsetof(_PyStackChunk, data) */
#define MAX_CHUNK (1ULL << 32) /* bytes of a data stack chunk, at most */

void ffm_py_version_str(uint32_t hex, char *buf, size_t len)
{
	if (!(hex & 0xf0))
		snprintf(buf, len, "%u.%u", hex >> 24, (hex >> 16) & 0xff);
	else
		snprintf(buf, len, "%u.%u.%u", hex >> 24, (hex >> 16) & 0xff, (hex >> 8) & 0xff);
}

static const char *proc_dir(const char *root)
{
	return root ? root : "/proc";
}

/* ---- reading the process ------------------------------------------------------------------ */

static int mem_open(pid_t pid, const char *proc_root)
{
	char path[PATH_MAX];
	int fd;

	snprintf(path, sizeof(path), "%s/%d/mem", proc_dir(proc_root), (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/* Exactly @n bytes at @addr, or -EFAULT. */
static int mem_read(int fd, uint64_t addr, void *buf, size_t n)
{
	ssize_t r;

	if (!addr || addr + n < addr)
		return -EFAULT;
	r = pread(fd, buf, n, (off_t)addr);
	return r == (ssize_t)n ? 0 : -EFAULT;
}

static int mem_u64(int fd, uint64_t addr, uint64_t *v)
{
	return mem_read(fd, addr, v, sizeof(*v));
}

/* The process's mappings; clears @why. */
static int read_maps(pid_t pid, const char *proc_root, struct ffm_map **maps, size_t *n,
		     char *why, size_t len)
{
	char path[PATH_MAX];

	if (len)
		why[0] = 0;
	snprintf(path, sizeof(path), "%s/%d/maps", proc_dir(proc_root), (int)pid);
	return ffm_maps_parse(path, maps, n);
}

/* ---- detection ---------------------------------------------------------------------------- */

struct syms {
	uint64_t runtime, version, code_type, str_type, bytes_type;
	bool debug, free_threaded;
	bool since39, since310; /* C API functions new in 3.9, in 3.10 (note_sym) */
};

static void note_sym(struct syms *s, const char *name, uint64_t v)
{
	static const char *const debug[] = { "_Py_RefTotal", "_Py_GetRefTotal",
					      "_Py_NegativeRefcount", "_Py_GetGlobalRefTotal" };
	static const char *const ft[] = { "_Py_MergeZeroLocalRefcount", "_Py_ExplicitMergeRefcount" };

	if (!strcmp(name, "_PyRuntime"))
		s->runtime = v;
	else if (!strcmp(name, "Py_Version"))
		s->version = v;
	else if (!strcmp(name, "PyCode_Type"))
		s->code_type = v;
	else if (!strcmp(name, "PyUnicode_Type"))
		s->str_type = v;
	else if (!strcmp(name, "PyBytes_Type"))
		s->bytes_type = v;
	else if (!strcmp(name, "PyModule_AddType") || !strcmp(name, "PyType_FromModuleAndSpec"))
		s->since39 = true;
	else if (!strcmp(name, "PyAIter_Check") || !strcmp(name, "PyIter_Send") ||
		 !strcmp(name, "Py_IsNone"))
		s->since310 = true;
	for (size_t i = 0; i < sizeof(debug) / sizeof(debug[0]); i++)
		s->debug |= !strcmp(name, debug[i]);
	for (size_t i = 0; i < sizeof(ft) / sizeof(ft[0]); i++)
		s->free_threaded |= !strcmp(name, ft[i]);
}

/* The symbols of .dynsym that say what build @e is (vaddrs). */
static int read_syms(const struct ffm_elf *e, struct syms *s)
{
	Elf_Scn *scn = NULL;

	memset(s, 0, sizeof(*s));
	while ((scn = elf_nextscn(e->elf, scn))) {
		GElf_Shdr sh;
		Elf_Data *data;

		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_DYNSYM || !sh.sh_entsize)
			continue;
		data = elf_getdata(scn, NULL);
		if (!data)
			return -ENOEXEC;
		for (size_t i = 0; i < sh.sh_size / sh.sh_entsize; i++) {
			GElf_Sym sym;
			const char *name;

			if (!gelf_getsym(data, i, &sym) || sym.st_shndx == SHN_UNDEF)
				continue;
			name = elf_strptr(e->elf, sh.sh_link, sym.st_name);
			if (name && (name[0] == '_' || name[0] == 'P'))
				note_sym(s, name, sym.st_value);
		}
		return 0;
	}
	return -ENODATA;
}

/* PY_VERSION_HEX from the file's Py_Version (read-only data). */
static int file_version(const struct ffm_elf *e, uint64_t vaddr, uint32_t *v)
{
	uint64_t off;

	if (ffm_elf_vaddr_to_offset(e, vaddr, &off) < 0 || off + 4 > e->raw_size)
		return -ENOEXEC;
	memcpy(v, e->raw + off, 4);
	return 0;
}

/* Load bias of @e mapped by @maps (the mapping of @path at its first PT_LOAD's offset). */
static int load_bias(const struct ffm_elf *e, const struct ffm_map *maps, size_t n,
		     const char *path, uint64_t *bias)
{
	uint64_t page = 4096, off, va;

	if (!e->nload)
		return -ENOEXEC;
	off = e->load[0].offset & ~(page - 1);
	va = e->load[0].vaddr & ~(page - 1);
	for (size_t i = 0; i < n; i++)
		if (maps[i].path && !strcmp(maps[i].path, path) && maps[i].offset == off) {
			*bias = maps[i].start - va;
			return 0;
		}
	return -ENOENT;
}

static const char *base_name(const char *path)
{
	const char *b = strrchr(path, '/');

	return b ? b + 1 : path;
}

static bool python_name(const char *path)
{
	const char *b = base_name(path);

	return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* The minor version a file's name gives ("python3.10", "libpython3.9.so.1.0"), -1: none. */
static int name_minor(const char *path)
{
	const char *b = base_name(path);
	unsigned minor;
	char dot;

	b += strncmp(b, "lib", 3) ? 0 : 3;
	if (sscanf(b, "python3.%u%c", &minor, &dot) >= 1 && minor < 100)
		return (int)minor;
	return -1;
}

static const struct ffm_py_offsets *table_of(uint32_t version)
{
	for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++)
		if (tables[i].major == version >> 24 && tables[i].minor == ((version >> 16) & 0xff))
			return &tables[i];
	return NULL;
}

static uint16_t max16(uint16_t a, uint16_t b)
{
	return a > b ? a : b;
}

static void fill_layout(struct ffm_py_build *b)
{
	const struct ffm_py_offsets *o = b->off;
	uint16_t end = max16(max16(o->ts_next, o->ts_thread_id), max16(o->ts_frame,
				max16(o->ts_chunk, o->ts_top))) + 8;

	b->bpf = (struct ffm_py_layout){
		.interp = b->runtime + o->rt_main, .is_threads = o->is_threads,
		.ts_next = o->ts_next, .ts_thread_id = o->ts_thread_id, .ts_frame = o->ts_frame,
		.ts_chunk = o->ts_chunk, .ts_top = o->ts_top, .ts_read = end,
		.cf_frame = o->cf_frame, .fr_code = o->fr_code, .fr_previous = o->fr_previous,
		.fr_instr = o->fr_instr, .fr_owner = o->fr_owner, .co_code = o->co_code,
		.chain = o->chain, .owner_cstack = o->owner_cstack, .lasti_shift = o->lasti_shift,
		.code_type = b->code_type, .str_type = b->str_type, .bytes_type = b->bytes_type,
		.co_filename = o->co_filename, .co_qualname = o->co_qualname,
		.co_linetable = o->co_linetable, .co_firstlineno = o->co_firstlineno,
		.str_ascii = o->str_ascii, .str_compact = o->str_compact,
	};
}

/* Check one mapped file: 1 a supported build, 0 not CPython, -ENOTSUP with @why. */
static int check_file(pid_t pid, const char *proc_root, const struct ffm_map *m,
		      const struct ffm_map *maps, size_t n, struct ffm_py_build *b, char *why,
		      size_t len)
{
	char path[PATH_MAX], ver[32];
	struct ffm_elf *e = NULL;
	struct ffm_user u;
	int err, named = name_minor(m->path);
	struct syms s;
	uint64_t bias;

	/* The file the process maps, not whatever the path names now; opened as the process's
	 * user, regular only, without blocking (symbols/useropen.h). */
	snprintf(path, sizeof(path), "%s/%d/map_files/%llx-%llx", proc_dir(proc_root), (int)pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	ffm_user_of_pid(proc_dir(proc_root), pid, &u);
	err = ffm_user_open(&u, AT_FDCWD, path, FFM_UOPEN_MAGICLINKS, NULL);
	if (err < 0 || ffm_elf_open_fd(err, &e) < 0)
		return 0;
	err = read_syms(e, &s);
	if (err < 0 || !s.runtime) {
		ffm_elf_close(e);
		return 0;
	}
	snprintf(b->path, sizeof(b->path), "%s", m->path);
	b->version = 0;
	if (s.version)
		err = file_version(e, s.version, &b->version);
	else if (s.since39) /* micro unknown: release level 0 */
		b->version = s.since310 ? 0x030a0000 : 0x03090000;
	if (!b->version) {
		snprintf(why, len, "%s: %s", m->path,
			 s.version ? "Py_Version unreadable" : "CPython before 3.9");
		err = -ENOTSUP;
	} else if (!s.version && named >= 0 && named != (int)((b->version >> 16) & 0xff)) {
		/* 3.9 and 3.10 differ in f_lasti, which the check against the process cannot
		 * see: the C API and the file's name must agree */
		ffm_py_version_str(b->version, ver, sizeof(ver));
		snprintf(why, len, "%s: its C API says %s, its name another version", m->path, ver);
		err = -ENOTSUP;
	} else if (s.debug || s.free_threaded) {
		ffm_py_version_str(b->version, ver, sizeof(ver));
		snprintf(why, len, "%s %s: %s build", m->path, ver, s.debug ? "debug" : "free-threaded");
		err = -ENOTSUP;
	} else if (!(b->off = table_of(b->version))) {
		ffm_py_version_str(b->version, ver, sizeof(ver));
		snprintf(why, len, "%s %s: no layout table for this version", m->path, ver);
		err = -ENOTSUP;
	} else if (!s.code_type || !s.str_type || !s.bytes_type ||
		   load_bias(e, maps, n, m->path, &bias) < 0) {
		snprintf(why, len, "%s: type objects or load address not found", m->path);
		err = -ENOTSUP;
	} else {
		b->runtime = s.runtime + bias;
		b->code_type = s.code_type + bias;
		b->str_type = s.str_type + bias;
		b->bytes_type = s.bytes_type + bias;
		fill_layout(b);
		err = 1;
	}
	ffm_elf_close(e);
	return err;
}

int ffm_py_detect(pid_t pid, const char *proc_root, struct ffm_py_build *b, char *why, size_t len)
{
	struct ffm_map *maps = NULL;
	size_t n = 0;
	int err, ret = 0;

	memset(b, 0, sizeof(*b));
	err = read_maps(pid, proc_root, &maps, &n, why, len);
	if (err < 0)
		return err;
	for (size_t i = 0; i < n && ret == 0; i++) {
		const struct ffm_map *m = &maps[i];
		bool seen = false;

		if (!m->path || m->path[0] != '/' || !python_name(m->path))
			continue;
		for (size_t j = 0; j < i && !seen; j++)
			seen = maps[j].path && !strcmp(maps[j].path, m->path);
		if (!seen)
			ret = check_file(pid, proc_root, m, maps, n, b, why, len);
	}
	ffm_maps_free(maps, n);
	return ret;
}

/* ---- the check against the live process --------------------------------------------------- */

/*
 * The check reads a process that runs on: a thread pushes and pops frames, makes and frees
 * thread states, switches data stack chunks while the check reads them, and a read caught in
 * such a moment fits no layout. So what a refused check read is remembered (a hash of each
 * address it read in the thread state that did not fit, and what it held), and a refusal
 * stands only when the check, made again at once, read the very same: state that changed
 * between two refusals was a moment, not the layout (-EAGAIN: checked again later).
 */
#define VERIFY_ROUNDS 3

struct reader {
	int fd;
	uint64_t seen; /* FNV-1a of (address, value or unreadable) of the reads */
};

static int rd_u64(struct reader *r, uint64_t addr, uint64_t *v)
{
	int err = mem_u64(r->fd, addr, v);
	uint64_t rec[2] = { addr, err < 0 ? ~0ULL : *v };

	r->seen = ffm_fnv1a(r->seen, rec, sizeof(rec));
	return err;
}

static int rd_u8(struct reader *r, uint64_t addr, uint8_t *v)
{
	int err = mem_read(r->fd, addr, v, 1);
	uint64_t rec[2] = { addr, err < 0 ? ~0ULL : *v };

	r->seen = ffm_fnv1a(r->seen, rec, sizeof(rec));
	return err;
}

static bool in_maps(const struct ffm_map *maps, size_t n, uint64_t a)
{
	for (size_t i = 0; i < n; i++)
		if (a >= maps[i].start && a < maps[i].end)
			return true;
	return false;
}

/* Walk one thread state's frames: 1 when a code object was found, 0 none, -EPROTO. */
static int check_frames(struct reader *r, const struct ffm_py_build *b, uint64_t ts)
{
	const struct ffm_py_offsets *o = b->off;
	uint64_t fr = 0, code, type;
	int found = 0;

	if (rd_u64(r, ts + o->ts_frame, &fr) < 0)
		return -EPROTO;
	if (fr && o->chain == FFM_PY_CHAIN_CFRAME && rd_u64(r, fr + o->cf_frame, &fr) < 0)
		return -EPROTO;
	for (int i = 0; fr && i < MAX_FRAMES; i++) {
		uint8_t owner = 0;

		if (rd_u64(r, fr + o->fr_code, &code) < 0 ||
		    (o->owner_cstack != 0xff && rd_u8(r, fr + o->fr_owner, &owner) < 0))
			return -EPROTO; /* no shim frames (0xff): owner stays 0 */
		if (code && owner != o->owner_cstack) {
			if (rd_u64(r, code + FFM_PY_OB_TYPE, &type) < 0 || type != b->code_type)
				return -EPROTO;
			found = 1;
		}
		if (rd_u64(r, fr + o->fr_previous, &fr) < 0)
			return -EPROTO;
	}
	return found;
}

/* A thread's data stack: none before its first frame, else datastack_top inside the chunk in
 * use (_PyStackChunk: previous, size, top, data[]). 0 or -EPROTO. */
static int check_datastack(struct reader *r, const struct ffm_py_offsets *o, uint64_t ts)
{
	uint64_t chunk = 0, top = 0, size = 0;

	if (rd_u64(r, ts + o->ts_chunk, &chunk) < 0 || rd_u64(r, ts + o->ts_top, &top) < 0)
		return -EPROTO;
	if (!chunk)
		return top ? -EPROTO : 0;
	if (rd_u64(r, chunk + 8, &size) < 0 || size > MAX_CHUNK)
		return -EPROTO;
	return top >= chunk + CHUNK_DATA && top <= chunk + size ? 0 : -EPROTO;
}

/* One check of the main interpreter's thread states: 0, -EAGAIN, -EPROTO, -EFAULT. */
static int verify_threads(struct reader *r, const struct ffm_py_build *b,
			  const struct ffm_map *maps, size_t n)
{
	const struct ffm_py_offsets *o = b->off;
	uint64_t interp = 0, ts = 0, back, tid;
	int frames = 0, err;

	if (mem_u64(r->fd, b->bpf.interp, &interp) < 0)
		return -EFAULT; /* _PyRuntime is the file's own data: the process is gone */
	if (!interp)
		return -EAGAIN; /* not initialized yet */
	if (rd_u64(r, interp + o->is_threads, &ts) < 0)
		return -EPROTO;
	for (int i = 0; ts && i < MAX_THREADS; i++) {
		r->seen = ffm_fnv1a(FFM_FNV1A_INIT, &ts, sizeof(ts)); /* a refusal: this thread's */
		if (rd_u64(r, ts + o->ts_interp, &back) < 0 || back != interp ||
		    rd_u64(r, ts + o->ts_thread_id, &tid) < 0 || !in_maps(maps, n, tid))
			return -EPROTO;
		err = check_frames(r, b, ts);
		if (err >= 0 && o->chain != FFM_PY_CHAIN_OBJECT && check_datastack(r, o, ts) < 0)
			err = -EPROTO;
		if (err < 0)
			return err;
		frames += err;
		if (rd_u64(r, ts + o->ts_next, &ts) < 0)
			return -EPROTO;
	}
	return frames ? 0 : -EAGAIN;
}

/* One round: the mappings as they are now (a new thread's stack is a new mapping), a check. */
static int verify_round(pid_t pid, const char *proc_root, const struct ffm_py_build *b,
			struct reader *r)
{
	struct ffm_map *maps = NULL;
	size_t n = 0;
	int err = read_maps(pid, proc_root, &maps, &n, NULL, 0);

	if (err < 0)
		return err;
	r->seen = FFM_FNV1A_INIT;
	err = verify_threads(r, b, maps, n);
	ffm_maps_free(maps, n);
	return err;
}

int ffm_py_verify(pid_t pid, const char *proc_root, const struct ffm_py_build *b, char *why,
		  size_t len)
{
	struct reader r = { .fd = mem_open(pid, proc_root) };
	uint64_t first = 0;
	bool moved = false;
	int err = -EPROTO;

	if (len)
		why[0] = 0;
	if (r.fd < 0)
		return r.fd == -ENOENT ? -ESRCH : r.fd;
	for (int i = 0; i < VERIFY_ROUNDS && err == -EPROTO; i++) {
		err = verify_round(pid, proc_root, b, &r);
		moved |= i && r.seen != first;
		first = i ? first : r.seen;
	}
	close(r.fd);
	if (err == -EPROTO && moved)
		return -EAGAIN; /* refused on what changed in between: a moment, not the layout */
	if (err == -EPROTO)
		snprintf(why, len, "%s: the interpreter's thread states or frames do not fit the "
			 "layout", b->path);
	return err;
}

/* ---- decoding ----------------------------------------------------------------------------- */

struct code_ent {
	struct oa_key k; /* a: code object address */
	char *file, *qualname, *folded;
	uint8_t *table;
	uint32_t table_len;
	uint32_t table_size; /* the full table's: more than table_len for a copy cut short */
	int32_t first_line;
	bool loaded, bad;
	bool cut;            /* the copy's table stayed cut short (complete_table) */
};

struct ffm_py_decoder {
	int fd;
	struct ffm_py_build b;
	struct oatab codes; /* struct code_ent */
};

static void code_clear(struct code_ent *c)
{
	free(c->file);
	free(c->qualname);
	free(c->folded);
	free(c->table);
	c->file = c->qualname = c->folded = NULL;
	c->table = NULL;
	c->table_len = c->table_size = 0;
	c->cut = false;
}

int ffm_py_decoder__new(pid_t pid, const char *proc_root, const struct ffm_py_build *b,
			struct ffm_py_decoder **ret)
{
	struct ffm_py_decoder *d = calloc(1, sizeof(*d));

	if (!d)
		return -ENOMEM;
	d->fd = mem_open(pid, proc_root);
	if (d->fd < 0) {
		int err = d->fd;

		free(d);
		return err;
	}
	d->b = *b;
	d->codes = OATAB_INIT(struct code_ent);
	*ret = d;
	return 0;
}

struct ffm_py_decoder *ffm_py_decoder__free(struct ffm_py_decoder *d)
{
	if (!d)
		return NULL;
	for (size_t i = 0; i < d->codes.cap; i++) {
		struct code_ent *c = oatab_slot(&d->codes, i);

		if (c)
			code_clear(c);
	}
	oatab_free(&d->codes);
	close(d->fd);
	free(d);
	return NULL;
}

/* One code point as UTF-8 into @out (room for 4); its length. */
static size_t utf8_put(uint32_t c, char *out)
{
	if (c < 0x80) {
		out[0] = (char)c;
		return 1;
	}
	if (c < 0x800) {
		out[0] = (char)(0xc0 | c >> 6);
		out[1] = (char)(0x80 | (c & 0x3f));
		return 2;
	}
	if (c < 0x10000) {
		out[0] = (char)(0xe0 | c >> 12);
		out[1] = (char)(0x80 | ((c >> 6) & 0x3f));
		out[2] = (char)(0x80 | (c & 0x3f));
		return 3;
	}
	if (c > 0x10ffff)
		c = 0xfffd;
	out[0] = (char)(0xf0 | c >> 18);
	out[1] = (char)(0x80 | ((c >> 12) & 0x3f));
	out[2] = (char)(0x80 | ((c >> 6) & 0x3f));
	out[3] = (char)(0x80 | (c & 0x3f));
	return 4;
}

/* @length characters of @kind (1, 2, 4) bytes each at @raw as a malloc'd UTF-8 string. */
static char *utf8_of(const uint8_t *raw, uint64_t length, uint32_t kind)
{
	char *s = malloc(length * 4 + 1), *p = s;

	if (!s)
		return NULL;
	for (uint64_t i = 0; i < length; i++) {
		uint32_t c = kind == 1 ? raw[i] : 0;

		if (kind == 2)
			c = (uint32_t)raw[2 * i] | (uint32_t)raw[2 * i + 1] << 8;
		else if (kind == 4)
			memcpy(&c, raw + 4 * i, 4);
		p += utf8_put(c ? c : 0xfffd, p);
	}
	*p = 0;
	return s;
}

/* A compact str object at @addr as a malloc'd UTF-8 string; NULL when it is none. */
static char *read_str(struct ffm_py_decoder *d, uint64_t addr)
{
	uint64_t type = 0, length = 0, data;
	uint32_t state = 0, kind;
	uint8_t *raw;
	char *s;

	if (mem_u64(d->fd, addr + FFM_PY_OB_TYPE, &type) < 0 || type != d->b.str_type ||
	    mem_u64(d->fd, addr + FFM_PY_STR_LENGTH, &length) < 0 ||
	    mem_read(d->fd, addr + FFM_PY_STR_STATE, &state, 4) < 0)
		return NULL;
	kind = (state >> 2) & 7;
	if (!((state >> 5) & 1) || length > MAX_STR || (kind != 1 && kind != 2 && kind != 4))
		return NULL; /* not compact (every code object's strings are), or too long */
	data = addr + (((state >> 6) & 1) ? d->b.off->str_ascii : d->b.off->str_compact);
	raw = malloc(length * kind + 1);
	if (!raw || mem_read(d->fd, data, raw, length * kind) < 0) {
		free(raw);
		return NULL;
	}
	s = utf8_of(raw, length, kind);
	free(raw);
	return s;
}

/* A bytes object's contents (malloc'd), at most MAX_LINETABLE bytes. */
static uint8_t *read_bytes(struct ffm_py_decoder *d, uint64_t addr, uint32_t *len)
{
	uint64_t type = 0, size = 0;
	uint8_t *buf;

	if (mem_u64(d->fd, addr + FFM_PY_OB_TYPE, &type) < 0 || type != d->b.bytes_type ||
	    mem_u64(d->fd, addr + FFM_PY_OB_SIZE, &size) < 0 || size > MAX_LINETABLE)
		return NULL;
	buf = malloc(size ? size : 1);
	if (!buf || (size && mem_read(d->fd, addr + FFM_PY_BYTES_SVAL, buf, size) < 0)) {
		free(buf);
		return NULL;
	}
	*len = (uint32_t)size;
	return buf;
}

/* With file and qualname set: the "qualname (file name)" of the function. */
static int code_fold(struct code_ent *c)
{
	const char *base = strrchr(c->file, '/');
	size_t len = strlen(c->qualname) + strlen(c->file) + 4;

	c->folded = malloc(len);
	if (!c->folded)
		return -ENOMEM;
	snprintf(c->folded, len, "%s (%s)", c->qualname, base ? base + 1 : c->file);
	return 0;
}

static int load_code(struct ffm_py_decoder *d, uint64_t code, struct code_ent *c)
{
	const struct ffm_py_offsets *o = d->b.off;
	uint64_t type = 0, file = 0, name = 0, qual = 0, table = 0;

	if (mem_u64(d->fd, code + FFM_PY_OB_TYPE, &type) < 0)
		return -EFAULT;
	code_clear(c);
	if (type != d->b.code_type || mem_u64(d->fd, code + o->co_filename, &file) < 0 ||
	    mem_u64(d->fd, code + o->co_name, &name) < 0 ||
	    mem_u64(d->fd, code + o->co_qualname, &qual) < 0 ||
	    mem_u64(d->fd, code + o->co_linetable, &table) < 0 ||
	    mem_read(d->fd, code + o->co_firstlineno, &c->first_line, 4) < 0)
		return -EPROTO;
	c->file = read_str(d, file);
	c->qualname = read_str(d, qual);
	if (!c->qualname)
		c->qualname = read_str(d, name);
	c->table = read_bytes(d, table, &c->table_len);
	c->table_size = c->table_len;
	if (!c->file || !c->qualname || c->first_line < 0)
		return -EPROTO;
	return code_fold(c);
}

/* A string of a code record: whole, or NULL. */
static char *rec_str(const uint8_t *raw, uint32_t cap, uint32_t chars, uint32_t bytes, uint8_t kind)
{
	if ((kind != 1 && kind != 2 && kind != 4) || bytes > cap || (uint64_t)chars * kind != bytes)
		return NULL; /* not a str, or cut short */
	return utf8_of(raw, chars, kind);
}

int ffm_py_decoder__code(struct ffm_py_decoder *d, const struct ffm_rec_pycode *r)
{
	char *file = rec_str(r->file, sizeof(r->file), r->file_chars, r->file_bytes, r->file_kind);
	char *qual = rec_str(r->qual, sizeof(r->qual), r->qual_chars, r->qual_bytes, r->qual_kind);
	struct code_ent *c;
	uint32_t n = r->table_bytes <= sizeof(r->table) && r->table_bytes <= r->table_size ?
			     r->table_bytes : 0;

	if (!file || !qual || r->first_line < 0) {
		free(file);
		free(qual);
		return -EPROTO;
	}
	c = oatab_find(&d->codes, r->code, 0, true);
	if (!c) {
		free(file);
		free(qual);
		return -ENOMEM;
	}
	code_clear(c);
	c->file = file;
	c->qualname = qual;
	c->first_line = r->first_line;
	c->table = malloc(n ? n : 1);
	if (c->table) {
		memcpy(c->table, r->table, n);
		c->table_len = n;
		c->table_size = n ? r->table_size : 0;
	}
	c->loaded = true;
	c->bad = code_fold(c) < 0;
	return c->bad ? -ENOMEM : 0;
}

/* A copied table cut short: the whole one from the process, if the code object at @code is
 * still the one copied (its file, name, first line and table size). Tried once. */
static void complete_table(struct ffm_py_decoder *d, uint64_t code, struct code_ent *c)
{
	struct code_ent now = { 0 };

	if (load_code(d, code, &now) == 0 && now.first_line == c->first_line &&
	    now.table_len == c->table_size && !strcmp(now.file, c->file) &&
	    !strcmp(now.qualname, c->qualname)) {
		free(c->table);
		c->table = now.table;
		c->table_len = now.table_len;
		now.table = NULL;
	}
	code_clear(&now);
	c->cut = c->table_len < c->table_size;
	c->table_size = c->table_len;
}

/* The bytes of code a 3.9 co_lnotab's pairs cover: its lines past them are not known. */
static int64_t lnotab_span(const uint8_t *t, size_t len)
{
	int64_t span = 0;

	for (size_t p = 0; p + 1 < len; p += 2)
		span += t[p];
	return span;
}

/* Whether @line, which @c's table gave for byte @instr, stands: a location table's or 3.10
 * table's prefix gives the lines of the code it covers and -1 past it, while a 3.9 table's
 * prefix gives its last line to whatever follows. */
static bool line_stands(enum ffm_py_lines fmt, const struct code_ent *c, int32_t instr, int line)
{
	return line >= 0 && (fmt != FFM_PY_LINES_LNOTAB || instr < lnotab_span(c->table, c->table_len));
}

/* The line of byte @instr of @c's code, -1: none. A copy whose table was cut short is
 * completed from the process where its prefix does not tell (tried once). */
static int frame_line(struct ffm_py_decoder *d, uint64_t code, struct code_ent *c, int32_t instr)
{
	enum ffm_py_lines fmt = d->b.off->lines;
	int line;

	if (instr < 0 || !c->table)
		return -1;
	line = ffm_py_line_of(fmt, c->table, c->table_len, c->first_line, instr);
	if (c->table_size > c->table_len && !line_stands(fmt, c, instr, line)) {
		complete_table(d, code, c);
		line = ffm_py_line_of(fmt, c->table, c->table_len, c->first_line, instr);
	}
	return c->cut && !line_stands(fmt, c, instr, line) ? -1 : line;
}

int ffm_py_decoder__frame(struct ffm_py_decoder *d, uint64_t code, int32_t instr,
			  struct ffm_py_loc *out)
{
	struct code_ent *c = oatab_find(&d->codes, code, 0, true);
	int line, err;

	if (!c)
		return -ENOMEM;
	if (!c->loaded) {
		err = load_code(d, code, c);
		if (err == -EFAULT || err == -ENOMEM)
			return err; /* unreadable now: tried again next time */
		c->loaded = true;
		c->bad = err < 0;
	}
	if (c->bad)
		return -EPROTO;
	line = frame_line(d, code, c, instr);
	out->file = c->file;
	out->qualname = c->qualname;
	out->folded = c->folded;
	out->first_line = (uint32_t)c->first_line;
	out->line = line > 0 ? (uint32_t)line : out->first_line;
	out->key = ffm_py_frame_key(out->file, out->qualname, out->line);
	return 0;
}

/* ---- line tables (3.11+: Objects/locations.md) -------------------------------------------- */

static uint32_t varint(const uint8_t *t, size_t len, size_t *p)
{
	uint32_t v = 0, shift = 0, b;

	do {
		if (*p >= len || shift > 28)
			return 0;
		b = t[(*p)++];
		v |= (b & 63) << shift;
		shift += 6;
	} while (b & 64);
	return v;
}

static int32_t svarint(const uint8_t *t, size_t len, size_t *p)
{
	uint32_t v = varint(t, len, p);

	return (v & 1) ? -(int32_t)(v >> 1) : (int32_t)(v >> 1);
}

int ffm_py_line_at(const uint8_t *t, size_t len, int first_line, int64_t unit)
{
	int64_t line = first_line, addr = 0;
	size_t p = 0;

	while (p < len) {
		uint8_t b = t[p];
		unsigned code = (b >> 3) & 15, n = (b & 7) + 1;
		size_t q = p + 1;

		if (!(b & 0x80))
			return -1; /* every entry starts with bit 7 set */
		if (code == 14 || code == 13)
			line += svarint(t, len, &q);
		else if (code >= 10 && code <= 12)
			line += code - 10;
		if (unit >= addr && unit < addr + n)
			return code == 15 || line <= 0 || line > INT32_MAX ? -1 : (int)line;
		addr += n;
		for (p++; p < len && !(t[p] & 0x80); p++)
			;
	}
	return -1;
}

/* 3.9's co_lnotab (Objects/lnotab_notes.txt of 3.9): each pair's byte delta starts a new
 * line at its line delta; the last line runs to the end of the code. */
static int line_lnotab(const uint8_t *t, size_t len, int first_line, int64_t offset)
{
	int64_t line = first_line, addr = 0;

	for (size_t p = 0; p + 1 < len; p += 2) {
		addr += t[p];
		if (addr > offset)
			break;
		line += (int8_t)t[p + 1];
	}
	return line <= 0 || line > INT32_MAX ? -1 : (int)line;
}

/* 3.10's co_linetable (PEP 626): each pair covers its byte delta of code, at the line its
 * line delta leads to, or at none (-128); past the last pair there is no code. */
static int line_linetable(const uint8_t *t, size_t len, int first_line, int64_t offset)
{
	int64_t line = first_line, end = 0;

	for (size_t p = 0; p + 1 < len; p += 2) {
		int8_t delta = (int8_t)t[p + 1];
		int64_t start = end;

		end += t[p];
		if (delta != -128)
			line += delta;
		if (offset >= start && offset < end)
			return delta == -128 || line <= 0 || line > INT32_MAX ? -1 : (int)line;
	}
	return -1;
}

int ffm_py_line_of(enum ffm_py_lines fmt, const uint8_t *t, size_t len, int first_line,
		   int64_t offset)
{
	if (offset < 0)
		return -1;
	switch (fmt) {
	case FFM_PY_LINES_LNOTAB:
		return line_lnotab(t, len, first_line, offset);
	case FFM_PY_LINES_LINETABLE:
		return line_linetable(t, len, first_line, offset);
	default:
		return ffm_py_line_at(t, len, first_line, offset / 2);
	}
}

uint64_t ffm_py_frame_key(const char *file, const char *qualname, uint32_t line)
{
	uint64_t h = ffm_fnv1a(FFM_FNV1A_INIT, "py", 3);

	h = ffm_fnv1a(h, file, strlen(file) + 1);
	h = ffm_fnv1a(h, qualname, strlen(qualname) + 1);
	h = ffm_fnv1a(h, &line, sizeof(line));
	return h ? h : 1;
}
