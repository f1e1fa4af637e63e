/* SPDX-License-Identifier: MIT */
/*
 * symbols/python.c against live interpreters (python3.11 and python3 on PATH, each when it is
 * CPython 3.11+): the location-table decoder agrees with the interpreter's own co_lines(); a
 * running interpreter is detected, its layout checks out, and a frame's (code, instruction)
 * decodes to the file, qualified name and line the interpreter reports; an object that is not
 * a code object is refused; copies of code objects (code records) decode without the process.
 */
#include <signal.h>
#include <sys/wait.h>

#include "symbols/ffm_python.h"
#include "tests/testutil.h"

/* Every python3.11 and python3 in PATH's directories (not only the first of each). */
static char pythons[16][512];
static size_t npythons;

__attribute__((constructor)) static void find_pythons(void)
{
	const char *path = getenv("PATH");
	static const char *const names[] = { "python3.11", "python3" };
	char dir[400];

	while (path && *path && npythons < 16) {
		size_t n = strcspn(path, ":");

		snprintf(dir, sizeof(dir), "%.*s", (int)n, path);
		for (size_t i = 0; i < 2 && npythons < 16; i++) {
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

static const char live_script[] =
	"import sys, time\n"
	"if sys.version_info < (3, 11): sys.exit(1)\n"
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
 * the units its prefix covers and the first line past it (the object there is another); a
 * copy whose name was cut is refused and the process is read instead. 0 or -EBADMSG.
 */
static int check_copies(struct ffm_py_decoder *d, uint64_t addr)
{
	/* Three entries of two code units each ("no column" form, line deltas 2, 1, 1). */
	static const uint8_t table[] = { 0xe9, 0x04, 0xe9, 0x02, 0xe9, 0x02 };
	static struct ffm_rec_pycode r;
	struct ffm_py_loc loc;

	memset(&r, 0, sizeof(r));
	r.hdr.type = FFM_REC_PYCODE;
	r.code = addr;
	r.first_line = 10;
	r.file_kind = r.qual_kind = 1;
	r.file_chars = r.file_bytes = sprintf((char *)r.file, "/job/train.py");
	r.qual_chars = r.qual_bytes = sprintf((char *)r.qual, "Model.step");
	memcpy(r.table, table, sizeof(table));
	r.table_bytes = r.table_size = sizeof(table);
	if (ffm_py_decoder__code(d, &r) < 0 || ffm_py_decoder__frame(d, addr, 8, &loc) < 0 ||
	    strcmp(loc.file, "/job/train.py") || strcmp(loc.folded, "Model.step (train.py)") ||
	    loc.line != 14 || loc.first_line != 10)
		return -EBADMSG;
	/* A new copy of the address replaces the old one; its table cut after two entries. */
	r.first_line = 20;
	r.table_bytes = 4;
	if (ffm_py_decoder__code(d, &r) < 0 || ffm_py_decoder__frame(d, addr, 6, &loc) < 0 ||
	    loc.line != 23 || ffm_py_decoder__frame(d, addr, 8, &loc) < 0 || loc.line != 20)
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
	struct ffm_py_build b;
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
	ASSERT_OK(ffm_py_decoder__new(pid, NULL, &b, &d));
	err = ffm_py_decoder__frame(d, code, lasti, &loc);
	if (err == 0 && (strcmp(loc.file, file) || strcmp(loc.qualname, "K.outer.<locals>.inner") ||
			 loc.line != (uint32_t)line))
		err = -EINVAL;
	if (err == 0)
		err = ffm_py_decoder__frame(d, notcode, 0, &loc) == -EPROTO ? 0 : -EBADMSG;
	if (err == 0)
		err = check_copies(d, notcode);
	ffm_py_decoder__free(d);
	ASSERT_MSG(err == 0, "%s: decode: %d (%s %s:%u, want %s:%d)", py, err,
		   err == -EINVAL ? loc.qualname : "", err == -EINVAL ? loc.file : "",
		   err == -EINVAL ? loc.line : 0, file, line);
}

TEST(live_interpreter_detected_checked_decoded)
{
	int tried = 0;

	if (geteuid() != 0)
		SKIP("needs root (reads /proc/PID/mem of a child)");
	for (size_t k = 0; k < npythons; k++) {
		int fds[2], st;
		pid_t pid;
		FILE *in;
		char ver[64];

		if (run_py(pythons[k], "import sys; print(1); sys.exit(sys.version_info < (3, 11))", ver,
			   sizeof(ver)) < 0)
			continue;
		tried++;
		ASSERT_OK(pipe(fds));
		pid = fork();
		ASSERT(pid >= 0);
		if (pid == 0) {
			dup2(fds[1], 1);
			close(fds[0]);
			execl(pythons[k], pythons[k], "-c", live_script, (char *)NULL);
			_exit(127);
		}
		close(fds[1]);
		in = fdopen(fds[0], "r");
		check_live(pythons[k], pid, in);
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		fclose(in);
	}
	if (!tried)
		SKIP("no CPython 3.11+ on PATH");
}

TEST_MAIN()
