/* SPDX-License-Identifier: MIT */
/*
 * symbols/python.c against live interpreters (python3.9 to 3.13 and python3 on PATH, the paths in
 * FFM_TEST_PYTHONS, e.g. other versions' builds, each when it is CPython 3.9+): the line-table
 * decoders agree with the interpreter's own (co_lines(), or dis.findlinestarts() on 3.9), and
 * with tables 3.9 and 3.10 made, kept here for machines without them; a running interpreter is
 * detected, its layout checks out, and a frame's (code, instruction) decodes to the file,
 * qualified name (3.9, 3.10: the name) and line the interpreter reports; an object that is not
 * a code object is refused; copies of code objects (code records) decode without the process.
 */
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>

#include "symbols/ffm_python.h"
#include "tests/testutil.h"

/* The executables FFM_TEST_PYTHONS names (paths, separated by spaces), then every python3.9
 * ... python3.13 and python3 in PATH's directories (not only the first of each). */
static char pythons[32][512];
static size_t npythons;

__attribute__((constructor)) static void find_pythons(void)
{
	const char *path = getenv("PATH"), *more = getenv("FFM_TEST_PYTHONS");
	static const char *const names[] = { "python3.9",  "python3.10", "python3.11",
					      "python3.12", "python3.13", "python3" };
	char dir[400];

	while (more && *more && npythons < 32) {
		size_t n = strcspn(more, " ");

		snprintf(pythons[npythons], sizeof(pythons[0]), "%.*s", (int)n, more);
		if (n && access(pythons[npythons], X_OK) == 0)
			npythons++;
		more += n + (more[n] == ' ');
	}

	while (path && *path && npythons < 32) {
		size_t n = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
		for (size_t i = 0; i < sizeof(names) / sizeof(names[0]) && npythons < 32; i++) {
			snprintf(pythons[npythons], sizeof(pythons[0]), "%s/%s", dir, names[i]);
			if (n && access(pythons[npythons], X_OK) == 0)
				npythons++;
		}
		path += n + (path[n] == ':');
	}
}

/* Output of `PY -c SCRIPT` (first @len bytes); 0 or -1 when it could not run. */
static int run_py(const char *py, const char *script, char *out, size_t len)
{
	char cmd[8192];
	FILE *f;
	size_t n;

	snprintf(cmd, sizeof(cmd), "%s -c '%s' 2>/dev/null", py, script);
	f = popen(cmd, "r");
	if (!f)
		return -1;
	n = fread(out, 1, len - 1, f);
	out[n] = 0;
	return pclose(f) == 0 && n ? 0 : -1;
}

static const char table_script[] =
	"import sys\n"
	"if sys.version_info < (3, 11): sys.exit(1)\n"
	"def f(a):\n"
	"    b = [x * 2 for x in a]\n"
	"    try:\n"
	"        c = sum(b) +\\\n"
	"            len(a)\n"
	"    except ValueError:\n"
	"        c = None\n"
	"    return c\n"
	"co = f.__code__\n"
	"print(co.co_firstlineno, co.co_linetable.hex())\n"
	"for s, e, l in co.co_lines(): print(s, e, -1 if l is None else l)\n";

TEST(line_table_matches_co_lines)
{
	int tried = 0;

	for (size_t k = 0; k < npythons; k++) {
		static char out[65536];
		uint8_t table[4096];
		char hex[8192], *p;
		int first, s, e, l, n = 0, checked = 0;
		size_t tlen;

		if (run_py(pythons[k], table_script, out, sizeof(out)) < 0)
			continue;
		tried++;
		ASSERT(sscanf(out, "%d %8191s%n", &first, hex, &n) == 2);
		tlen = strlen(hex) / 2;
		ASSERT(tlen <= sizeof(table));
		for (size_t i = 0; i < tlen; i++)
			ASSERT(sscanf(hex + 2 * i, "%2hhx", &table[i]) == 1);
		for (p = out + n; sscanf(p, "%d %d %d%n", &s, &e, &l, &n) == 3; p += n)
			for (int u = s / 2; u < e / 2; u++, checked++)
				ASSERT_MSG(ffm_py_line_at(table, tlen, first, u) == l,
					   "%s: code unit %d: line %d, want %d", pythons[k], u,
					   ffm_py_line_at(table, tlen, first, u), l);
		ASSERT(checked > 10);
		ASSERT_EQ(ffm_py_line_at(table, tlen, first, 100000), -1);
		ASSERT_EQ(ffm_py_line_at(table, 0, first, 0), -1);
	}
	if (!tried)
		SKIP("no CPython 3.11+ on PATH");
}

/*
 * The older tables, as 3.9.18 and 3.10.13 made them for this function (first line 2), and the
 * line of each instruction (byte offset) by the interpreter: dis.findlinestarts() on 3.9,
 * co_lines() on 3.10 (-1: no line). Both have lines going back; 3.10 has a run of no line.
 *
 *     def f(a):
 *         b = [x * 2 for x in a]
 *         total = 0
 *         for v in b:
 *             if v > 3:
 *                 total += (v +
 *                           1)
 *         try:
 *             c = sum(b) + \
 *                 len(a)
 *         except ValueError:
 *             c = None
 *         return (c,
 *                 total)
 */
static const struct {
	enum ffm_py_lines fmt;
	const char *table, *lines;
} old_tables[] = {
	{ FFM_PY_LINES_LNOTAB, "00010e01040108010801040102ff08020201060106ff08020c010a01020102ff",
	  "0:3 2:3 4:3 6:3 8:3 10:3 12:3 14:4 16:4 18:5 20:5 22:5 24:5 26:6 28:6 30:6 32:6 34:7 "
	  "36:7 38:8 40:7 42:7 44:7 46:7 48:9 50:10 52:10 54:10 56:11 58:11 60:11 62:10 64:10 "
	  "66:10 68:10 70:12 72:12 74:12 76:12 78:12 80:12 82:13 84:13 86:13 88:13 90:13 92:14 "
	  "94:15 96:14 98:14" },
	{ FFM_PY_LINES_LINETABLE,
	  "0e010401080108010401020106ff028002020601060106ff0204020104ff0cfe06010201020104ff02fe",
	  "0:3 2:3 4:3 6:3 8:3 10:3 12:3 14:4 16:4 18:5 20:5 22:5 24:5 26:6 28:6 30:6 32:6 34:7 "
	  "36:7 38:8 40:7 42:7 44:7 46:-1 48:9 50:10 52:10 54:10 56:11 58:11 60:11 62:10 64:10 "
	  "66:10 68:14 70:15 72:14 74:14 76:12 78:12 80:12 82:12 84:12 86:12 88:13 90:13 92:13 "
	  "94:14 96:15 98:14 100:14 102:12" },
};

/* Check "OFFSET:LINE ..." @lines against the table @hex of format @fmt; the pairs checked. */
static int check_lines(const char *who, enum ffm_py_lines fmt, const char *hex, int first,
		       const char *lines)
{
	uint8_t table[4096];
	size_t tlen = strlen(hex) / 2;
	int off, line, n, checked = 0;

	ASSERT(tlen <= sizeof(table));
	for (size_t i = 0; i < tlen; i++)
		ASSERT(sscanf(hex + 2 * i, "%2hhx", &table[i]) == 1);
	for (const char *p = lines; sscanf(p, "%d:%d%n", &off, &line, &n) == 2; p += n, checked++)
		ASSERT_MSG(ffm_py_line_of(fmt, table, tlen, first, off) == line,
			   "%s: offset %d: line %d, want %d", who, off,
			   ffm_py_line_of(fmt, table, tlen, first, off), line);
	ASSERT_EQ(ffm_py_line_of(fmt, table, tlen, first, -1), -1);
	ASSERT_EQ(ffm_py_line_of(fmt, table, 0, first, 0), fmt == FFM_PY_LINES_LNOTAB ? first : -1);
	return checked;
}

/* The same function's table and lines, printed by the interpreter (3.9, 3.10 only). */
static const char old_table_script[] =
	"import sys, dis\n"
	"if not (3, 9) <= sys.version_info < (3, 11): sys.exit(1)\n"
	"def f(a):\n"
	"    b = [x * 2 for x in a]\n"
	"    total = 0\n"
	"    for v in b:\n"
	"        if v > 3:\n"
	"            total += (v +\n"
	"                      1)\n"
	"    try:\n"
	"        c = sum(b) + \\\n"
	"            len(a)\n"
	"    except ValueError:\n"
	"        c = None\n"
	"    return (c,\n"
	"            total)\n"
	"co = f.__code__\n"
	"old = sys.version_info < (3, 10)\n"
	"print(int(old), co.co_firstlineno, (co.co_lnotab if old else co.co_linetable).hex())\n"
	"exp = {}\n"
	"if old:\n"
	"    starts = list(dis.findlinestarts(co))\n"
	"    for o in range(0, len(co.co_code), 2):\n"
	"        exp[o] = max([s for s in starts if s[0] <= o] or [(0, co.co_firstlineno)])[1]\n"
	"else:\n"
	"    for s, e, l in co.co_lines():\n"
	"        for o in range(s, e, 2): exp[o] = -1 if l is None else l\n"
	"print(\" \".join(\"%d:%d\" % x for x in sorted(exp.items())))\n";

TEST(older_line_tables_decode_as_the_interpreter_does)
{
	int tried = 0;

	for (size_t i = 0; i < sizeof(old_tables) / sizeof(old_tables[0]); i++)
		ASSERT(check_lines("kept table", old_tables[i].fmt, old_tables[i].table, 2,
				   old_tables[i].lines) > 40);
	for (size_t k = 0; k < npythons; k++) {
		static char out[65536], hex[8192];
		int old, first, n = 0;

		if (run_py(pythons[k], old_table_script, out, sizeof(out)) < 0)
			continue;
		tried++;
		ASSERT(sscanf(out, "%d %d %8191s%n", &old, &first, hex, &n) == 3);
		ASSERT(check_lines(pythons[k], old ? FFM_PY_LINES_LNOTAB : FFM_PY_LINES_LINETABLE,
				   hex, first, out + n) > 40);
	}
	if (!tried)
		printf("# no CPython 3.9 or 3.10 here: the kept tables only\n");
}

static const char live_script[] =
	"import sys, time\n"
	"if sys.version_info < (3, 9): sys.exit(1)\n"
	"class K:\n"
	"    def outer(self):\n"
	"        def inner():\n"
	"            f = sys._getframe()\n"
	"            print(id(f.f_code), f.f_lasti, f.f_lineno, id(12345678901), f.f_code.co_filename, flush=True); time.sleep(30)\n"
	"        inner()\n"
	"K().outer()\n";

/*
 * Code records (FFM_REC_PYCODE) at @addr, an object of the process that is no code object:
 * frames decode from the copy, never from the process; a copy whose table was cut decodes
 * the code its prefix covers and the first line past it (the object there is another); a
 * copy whose name was cut is refused and the process is read instead. @fmt: the build's
 * table format. 0 or -EBADMSG.
 */
static int check_copies(struct ffm_py_decoder *d, uint64_t addr, enum ffm_py_lines fmt)
{
	/* Three runs of 4 bytes of code at line deltas 2, 1, 1 in each format: from first line
	 * 10, byte 8 is at line 14. Cut to its first 4 bytes, from first line 20: what the
	 * prefix tells (byte @cut_at at line @cut_line), and byte 8 at the first line. A 3.9
	 * table tells no more than its prefix's pairs cover (4 bytes), the others 8. */
	static const struct {
		uint8_t table[6];
		int cut_at, cut_line;
	} f[] = {
		[FFM_PY_LINES_LOCATIONS] = { { 0xe9, 0x04, 0xe9, 0x02, 0xe9, 0x02 }, 6, 23 },
		[FFM_PY_LINES_LNOTAB] = { { 0x00, 0x02, 0x04, 0x01, 0x04, 0x01 }, 2, 22 },
		[FFM_PY_LINES_LINETABLE] = { { 0x04, 0x02, 0x04, 0x01, 0x04, 0x01 }, 6, 23 },
	};
	static struct ffm_rec_pycode r;
	struct ffm_py_loc loc;

	memset(&r, 0, sizeof(r));
	r.hdr.type = FFM_REC_PYCODE;
	r.code = addr;
	r.first_line = 10;
	r.file_kind = r.qual_kind = 1;
	r.file_chars = r.file_bytes = sprintf((char *)r.file, "/job/train.py");
	r.qual_chars = r.qual_bytes = sprintf((char *)r.qual, "Model.step");
	memcpy(r.table, f[fmt].table, sizeof(f[fmt].table));
	r.table_bytes = r.table_size = sizeof(f[fmt].table);
	if (ffm_py_decoder__code(d, &r) < 0 || ffm_py_decoder__frame(d, addr, 8, &loc) < 0 ||
	    strcmp(loc.file, "/job/train.py") || strcmp(loc.folded, "Model.step (train.py)") ||
	    loc.line != 14 || loc.first_line != 10)
		return -EBADMSG;
	/* A new copy of the address replaces the old one; its table cut after 4 bytes. */
	r.first_line = 20;
	r.table_bytes = 4;
	if (ffm_py_decoder__code(d, &r) < 0 || ffm_py_decoder__frame(d, addr, f[fmt].cut_at, &loc) < 0 ||
	    loc.line != (uint32_t)f[fmt].cut_line || ffm_py_decoder__frame(d, addr, 8, &loc) < 0 ||
	    loc.line != 20)
		return -EBADMSG;
	/* A name cut short: no copy; the process holds no code object there. */
	r.file_chars = 500;
	if (ffm_py_decoder__code(d, &r) != -EPROTO || ffm_py_decoder__frame(d, addr + 8, 0, &loc) != -EPROTO)
		return -EBADMSG;
	/* Records are copies of the job's memory: any bytes, lengths and kinds. Each is taken or
	 * refused, and what decodes is a string and a line (run under `make sanitize` too). */
	srand(7);
	for (int i = 0; i < 3000; i++) {
		uint8_t *raw = (uint8_t *)&r;
		int err;

		for (size_t k = sizeof(r.hdr); k < sizeof(r); k++)
			raw[k] = (uint8_t)(k < 64 || k % 97 == 0 || i % 3 ? rand() : rand() % 4);
		r.code = addr + 16 * (uint64_t)(i % 5);
		r.file_kind = (uint8_t)(1u << (rand() % 4));
		r.qual_kind = (uint8_t)(1u << (rand() % 4));
		r.file_chars = (uint32_t)(rand() % 300);
		r.qual_chars = (uint32_t)(rand() % 80);
		r.file_bytes = (uint16_t)(i % 2 ? r.file_chars * r.file_kind : (uint32_t)(rand() % 1200));
		r.qual_bytes = (uint16_t)(i % 2 ? r.qual_chars * r.qual_kind : (uint32_t)(rand() % 300));
		r.table_bytes = (uint16_t)(rand() % 9000);
		r.table_size = (uint32_t)(r.table_bytes + rand() % 3);
		r.first_line = rand() % 5 ? rand() % 100000 : -rand();
		err = ffm_py_decoder__code(d, &r);
		if (err != 0 && err != -EPROTO)
			return -EBADMSG;
		err = ffm_py_decoder__frame(d, r.code, rand() % 20000 - 10, &loc);
		if (err == 0 && (strlen(loc.file) > 4 * FFM_PY_FILE_BYTES || !loc.qualname || !loc.folded ||
				 loc.line > INT32_MAX))
			return -EBADMSG;
	}
	return 0;
}

static void check_live(const char *py, pid_t pid, FILE *in)
{
	unsigned long long code, notcode;
	struct ffm_py_decoder *d = NULL;
	struct ffm_py_build b, bad;
	struct ffm_py_loc loc;
	char why[512], file[512];
	int lasti, line, err = -EAGAIN;

	ASSERT_MSG(fscanf(in, "%llu %d %d %llu %511s", &code, &lasti, &line, &notcode, file) == 5,
		   "%s: no frame line", py);
	ASSERT_MSG(ffm_py_detect(pid, NULL, &b, why, sizeof(why)) == 1, "%s: %s", py, why);
	for (int i = 0; i < 50 && err == -EAGAIN; i++) {
		err = ffm_py_verify(pid, NULL, &b, why, sizeof(why));
		if (err == -EAGAIN)
			usleep(20000);
	}
	ASSERT_MSG(err == 0, "%s: verify: %d %s", py, err, why);
	/* A layout that does not fit stays refused (frames that lead to no code object), however
	 * often the check is made again. */
	bad = b;
	bad.code_type = b.str_type;
	err = ffm_py_verify(pid, NULL, &bad, why, sizeof(why));
	ASSERT_MSG(err == -EPROTO && strstr(why, "do not fit the layout"),
		   "%s: a wrong code type: %d %s", py, err, why);
	ASSERT_OK(ffm_py_decoder__new(pid, NULL, &b, &d));
	err = ffm_py_decoder__frame(d, code, lasti, &loc);
	if (err == 0 && (strcmp(loc.file, file) ||
			 strcmp(loc.qualname, b.version < 0x030b0000 ? "inner" : "K.outer.<locals>.inner") ||
			 loc.line != (uint32_t)line))
		err = -EINVAL;
	if (err == 0)
		err = ffm_py_decoder__frame(d, notcode, 0, &loc) == -EPROTO ? 0 : -EBADMSG;
	if (err == 0)
		err = check_copies(d, notcode, b.version < 0x030a0000 ? FFM_PY_LINES_LNOTAB :
					       b.version < 0x030b0000 ? FFM_PY_LINES_LINETABLE :
									FFM_PY_LINES_LOCATIONS);
	ffm_py_decoder__free(d);
	ASSERT_MSG(err == 0, "%s: decode: %d (%s %s:%u, want %s:%d)", py, err,
		   err == -EINVAL ? loc.qualname : "", err == -EINVAL ? loc.file : "",
		   err == -EINVAL ? loc.line : 0, file, line);
	ffm_py_version_str(b.version, why, sizeof(why));
	printf("# %s: CPython %s detected, checked, its frame decoded\n", py, why);
}

/* `PY -c SCRIPT` running, its stdout on a pipe whose read end is *@fd; its pid. */
static pid_t spawn_py(const char *py, const char *script, int *fd)
{
	int fds[2];
	pid_t pid;

	ASSERT_OK(pipe(fds));
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0) {
		dup2(fds[1], 1);
		close(fds[0]);
		execl(py, py, "-c", script, (char *)NULL);
		_exit(127);
	}
	close(fds[1]);
	*fd = fds[0];
	return pid;
}

TEST(live_interpreter_detected_checked_decoded)
{
	int tried = 0;

	if (geteuid() != 0)
		SKIP("needs root (reads /proc/PID/mem of a child)");
	for (size_t k = 0; k < npythons; k++) {
		int fd, st;
		pid_t pid;
		FILE *in;
		char ver[64];

		if (run_py(pythons[k], "import sys; print(1); sys.exit(sys.version_info < (3, 9))", ver,
			   sizeof(ver)) < 0)
			continue;
		tried++;
		pid = spawn_py(pythons[k], live_script, &fd);
		in = fdopen(fd, "r");
		check_live(pythons[k], pid, in);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fclose(in);
	}
	if (!tried)
		SKIP("no CPython 3.9+ on PATH");
}

/* Calls, generators and threads that come and go, all the time: frames are pushed and popped
 * and thread states made and freed while the check reads them. */
static const char busy_script[] =
	"import sys, threading\n"
	"if sys.version_info < (3, 9): sys.exit(1)\n"
	"def f(n): return f(n - 1) + 1 if n else 0\n"
	"def g(k):\n"
	"    for i in range(k): yield f(i % 40)\n"
	"def work(k):\n"
	"    for _ in range(k): sum(g(60))\n"
	"print(1, flush=True)\n"
	"for _ in range(40):\n"
	"    ts = [threading.Thread(target=work, args=(3,)) for _ in range(3)]\n"
	"    [t.start() for t in ts]; work(3); [t.join() for t in ts]\n";

/* Checks of @py's interpreter from its exec (the start-up) until it exits, as fast as they
 * go; those that said -EPROTO (the layout does not fit) into *@bad, all into *@n. */
static void verify_all_along(const char *py, int *bad, int *n, char *why, size_t len)
{
	struct ffm_py_build b;
	int fd, st, found = 0;
	pid_t pid = spawn_py(py, busy_script, &fd);

	while (waitpid(pid, &st, WNOHANG) == 0) {
		int err;

		if (found <= 0)
			found = ffm_py_detect(pid, NULL, &b, why, len);
		if (found <= 0)
			continue;
		err = ffm_py_verify(pid, NULL, &b, why, len);
		if (err == -EPROTO && kill(pid, 0) == 0 && waitpid(pid, &st, WNOHANG) == 0) {
			if (!*bad)
				printf("# %s: %s\n", py, why);
			++*bad;
		}
		++*n;
	}
	close(fd);
}

/* A check that cannot decide yet (the interpreter starting, a frame or thread state being made
 * or freed while it is read) says -EAGAIN, never that the layout does not fit: a refusal is
 * final for the process (issue 38, defect 9a). */
TEST(verify_never_refuses_an_interpreter_at_work)
{
	char seen[32][256];
	size_t nseen = 0;

	if (geteuid() != 0)
		SKIP("needs root (reads /proc/PID/mem of a child)");
	for (size_t k = 0; k < npythons; k++) {
		char exe[256], why[512] = "";
		int bad = 0, n = 0;
		bool dup = false;

		if (run_py(pythons[k], "import os, sys; print(os.path.realpath(sys.executable), end=\"\"); "
			   "sys.exit(sys.version_info < (3, 9))", exe, sizeof(exe)) < 0)
			continue;
		for (size_t i = 0; i < nseen && !dup; i++)
			dup = !strcmp(seen[i], exe);
		if (dup || nseen == 32)
			continue; /* the same build by another name (a link, pyenv's shim) */
		snprintf(seen[nseen++], sizeof(seen[0]), "%s", exe);
		for (int run = 0; run < 3; run++)
			verify_all_along(pythons[k], &bad, &n, why, sizeof(why));
		printf("# %s: %d of %d checks refused the layout\n", pythons[k], bad, n);
		ASSERT_MSG(bad == 0, "%s: %d of %d checks of a busy interpreter refused: %s",
			   pythons[k], bad, n, why);
	}
	if (!nseen)
		SKIP("no CPython 3.9+ on PATH");
}

/* A build before 3.9 (FFM_TEST_PYTHONS may name one) is refused, with the reason. */
TEST(builds_before_39_refused)
{
	int tried = 0;

	if (geteuid() != 0)
		SKIP("needs root (reads /proc/PID/maps of a child)");
	for (size_t k = 0; k < npythons; k++) {
		struct ffm_py_build b;
		char out[64], why[512];
		int fd, st, err;
		pid_t pid;

		if (run_py(pythons[k], "import sys; print(1); sys.exit(sys.version_info >= (3, 9))", out,
			   sizeof(out)) < 0)
			continue;
		tried++;
		pid = spawn_py(pythons[k], "import time; print(1, flush=True); time.sleep(30)", &fd);
		ASSERT(read(fd, out, 1) == 1); /* the interpreter is up */
		err = ffm_py_detect(pid, NULL, &b, why, sizeof(why));
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		close(fd);
		ASSERT_MSG(err == -ENOTSUP && strstr(why, "before 3.9"), "%s: %d %s", pythons[k], err, why);
		printf("# %s: refused (%s)\n", pythons[k], why);
	}
	if (!tried)
		SKIP("no CPython before 3.9 named in FFM_TEST_PYTHONS");
}

TEST_MAIN()
