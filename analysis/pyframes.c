/* SPDX-License-Identifier: MIT */
/*
 * Library code in stored stacks: which frames are Python code, which Python files are
 * installed libraries rather than the program, and which native source files are the
 * toolkit's or the standard library's headers. A call site is named by its first frame
 * outside them (analysis/sites.c), so that a `loss.item()` is named at the line of the
 * training loop, not inside torch, and a `thrust::reduce` at the user's line, not in
 * thrust/system/cuda/detail/util.h. The skipped frames stay in the stored stack.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ffm_analysis.h"
#include "symbols/ffm_driver.h"
#include "symbols/ffm_python.h"

/*
 * Installed code: site-packages and dist-packages (pip, Debian), the standard library under
 * any interpreter's prefix (<prefix>/lib/python3.X/, Debian's /usr/lib/python3/), frozen
 * modules, and torch's own Python wherever it is installed from (a source checkout too).
 */
const char *const ffm_an_py_library_default[] = {
	"*/site-packages/*", "*/dist-packages/*", "*/lib/python3*/*", "*/lib/python3/*",
	"<frozen *>", "*/torch/*", NULL,
};

/*
 * Source files whose code is compiled into the program but is not where its author fixes
 * anything: the CUDA toolkit's headers (cuda_runtime.h, crt/, Thrust, CUB, libcu++: under any
 * cuda* prefix or an include/ of their own), the launch stubs nvcc generates for each kernel
 * (`__device_stub__*` in a temporary *.cudafe1.stub.c: the user's line is the `<<<...>>>`
 * that calls it), the C++ standard library and the system's and compiler's headers. Paths are
 * matched with their `.` and `..` components resolved: nvcc names its headers
 * <prefix>/cuda/bin/../targets/<arch>/include/.
 */
const char *const ffm_an_src_library_default[] = {
	"*/cuda/include/*", "*/cuda-*/include/*", "*/cuda/targets/*", "*/cuda-*/targets/*",
	"*/include/thrust/*", "*/include/cub/*", "*/include/cccl/*", "*/include/crt/*",
	"*.cudafe1.stub.c", "*/include/c++/*", "/usr/include/*", "/usr/lib/gcc/*", NULL,
};

bool ffm_an_py_frame(const struct ffm_store_frame *f)
{
	return f->build_id && !strcmp(f->build_id, FFM_PY_BUILD_ID);
}

/* An environment variable's patterns, separated by ':'. */
static bool env_match(const char *env, const char *file)
{
	char pat[1024];

	while (*env) {
		size_t n = strcspn(env, ":");

		if (n && n < sizeof(pat)) {
			memcpy(pat, env, n);
			pat[n] = 0;
			if (fnmatch(pat, file, 0) == 0)
				return true;
		}
		env += n + (env[n] == ':');
	}
	return false;
}

/*
 * @path with "." and "dir/.." components removed, lexically (no file system: the path is the
 * build machine's), into @out; a path too long for it is left as it is.
 */
static const char *lexical_path(const char *path, char *out, size_t size)
{
	size_t start[128], depth = 0, keep = 0, n = 0; /* keep: leading ".."s, never dropped */
	size_t root = path[0] == '/';

	if (strlen(path) >= size || !strstr(path, "/."))
		return path;
	if (root)
		out[n++] = '/';
	for (const char *p = path; *p;) {
		size_t seg;
		bool up;

		while (*p == '/')
			p++;
		seg = strcspn(p, "/");
		up = seg == 2 && p[0] == '.' && p[1] == '.';
		if (!seg || (seg == 1 && p[0] == '.') || (up && root && depth == keep)) {
			/* nothing: an empty or "." component, or ".." at the root */
		} else if (up && depth > keep) {
			n = start[--depth];
		} else {
			if (depth == sizeof(start) / sizeof(start[0]))
				return path;
			start[depth++] = n;
			if (n > root)
				out[n++] = '/';
			memcpy(out + n, p, seg);
			n += seg;
			if (up)
				keep = depth;
		}
		p += seg;
	}
	out[n] = 0;
	return out;
}

/* @patterns, else those of the environment variable @env_name, else @defaults. */
static bool library_file(const char *file, const char *const *patterns, const char *env_name,
			 const char *const *defaults)
{
	const char *env = getenv(env_name);
	char clean[1024];

	if (!file || !*file)
		return true; /* nothing to point a user at */
	file = lexical_path(file, clean, sizeof(clean));
	if (!patterns && env)
		return env_match(env, file);
	for (const char *const *p = patterns ? patterns : defaults; *p; p++)
		if (fnmatch(*p, file, 0) == 0)
			return true;
	return false;
}

/* FFM_PY_LIBRARY: ffmctl --py-library sets it. */
bool ffm_an_py_library(const char *file, const char *const *patterns)
{
	return library_file(file, patterns, "FFM_PY_LIBRARY", ffm_an_py_library_default);
}

/* FFM_SRC_LIBRARY: ffmctl --src-library sets it. */
bool ffm_an_src_library(const char *file, const char *const *patterns)
{
	return library_file(file, patterns, "FFM_SRC_LIBRARY", ffm_an_src_library_default);
}

bool ffm_an_nvcc_kernel_wrapper(const char *inner, const char *func)
{
	static const char stub[] = "__device_stub__";
	const char *k;
	size_t n;

	if (!inner || !func || strncmp(inner, stub, sizeof(stub) - 1))
		return false;
	k = inner + sizeof(stub) - 1;
	n = strcspn(k, "("); /* the stub is C++: its demangled name has its parameters */
	if (func[0] == '_' && !strncmp(func + 1, k, n) && !func[n + 1])
		return true;
	return !strncmp(func, k, n) && !func[n];
}

int ffm_an_frame_rank(const struct ffm_store_frame *f, const char *const *src_library)
{
	bool line = f->file && *f->file && f->line;

	return (ffm_module_owner(f->module) != FFM_MODULE_NVIDIA) * 4 +
	       (line && !ffm_an_src_library(f->file, src_library)) * 2 + line;
}
