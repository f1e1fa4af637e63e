/* SPDX-License-Identifier: MIT */
/*
 * Python frames in stored stacks (symbols/ffm_python.h): which frames are Python code and
 * which of them are installed libraries rather than the program. A Python program's call site
 * is its first Python frame outside the libraries (analysis/sites.c), so that a
 * `loss.item()` is named at the line of the training loop, not inside torch.
 */
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "analysis/ffm_analysis.h"
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

bool ffm_an_py_frame(const struct ffm_store_frame *f)
{
	return f->build_id && !strcmp(f->build_id, FFM_PY_BUILD_ID);
}

/* FFM_PY_LIBRARY: patterns separated by ':' (ffmctl --py-library sets it). */
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

bool ffm_an_py_library(const char *file, const char *const *patterns)
{
	const char *env = getenv("FFM_PY_LIBRARY");

	if (!file || !*file)
		return true; /* nothing to point a user at */
	if (!patterns && env)
		return env_match(env, file);
	for (const char *const *p = patterns ? patterns : ffm_an_py_library_default; *p; p++)
		if (fnmatch(*p, file, 0) == 0)
			return true;
	return false;
}
