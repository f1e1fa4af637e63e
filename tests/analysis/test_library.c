// SPDX-License-Identifier: MIT
/*
 * Which source files name no call site (analysis/pyframes.c): the CUDA toolkit's headers as
 * nvcc spells them (<prefix>/cuda/bin/../targets/...), the launch stubs nvcc generates, the C++
 * standard library; not the user's own files, even under paths that look like a toolkit's once
 * their ".." are resolved. Installed Python code likewise.
 */
#include <stdlib.h>

#include "analysis/ffm_analysis.h"
#include "tests/testutil.h"

TEST(toolkit_headers_as_nvcc_names_them)
{
	unsetenv("FFM_SRC_LIBRARY");
	ASSERT(ffm_an_src_library("/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h", NULL));
	ASSERT(ffm_an_src_library("/usr/local/cuda-12.8/bin/../targets/x86_64-linux/include/cuda_runtime.h", NULL));
	ASSERT(ffm_an_src_library("/opt/nvidia/cuda/bin/./../targets/sbsa-linux/include/crt/host_runtime.h", NULL));
	ASSERT(ffm_an_src_library("/usr/local/cuda/include/thrust/system/cuda/detail/reduce.h", NULL));
	ASSERT(ffm_an_src_library("/usr/include/c++/12/bits/stl_vector.h", NULL));
	ASSERT(ffm_an_src_library("", NULL)); /* no file: nothing to point a user at */
}

TEST(nvcc_launch_stubs)
{
	unsetenv("FFM_SRC_LIBRARY");
	ASSERT(ffm_an_src_library("/tmp/tmpxft_0000021f_00000000-6_cudart_problems.cudafe1.stub.c", NULL));
	ASSERT(!ffm_an_src_library("/home/u/src/stub.c", NULL));
}

TEST(user_files_stay_user_files)
{
	unsetenv("FFM_SRC_LIBRARY");
	ASSERT(!ffm_an_src_library("/home/u/app/main.cu", NULL));
	ASSERT(!ffm_an_src_library("/home/u/app/../app2/./solver.cpp", NULL));
	/* ".." resolved: the file is not under cuda/targets */
	ASSERT(!ffm_an_src_library("/usr/local/cuda/targets/../../src/app.cu", NULL));
	ASSERT(!ffm_an_src_library("src/../main.cu", NULL));
	/* leading ".."s of a relative path stay: what they lead to is unknown */
	ASSERT(!ffm_an_src_library("../../targets/main.cu", NULL));
	ASSERT(!ffm_an_src_library("/../home/u/main.cu", NULL));
}

TEST(patterns_given_and_from_the_environment)
{
	const char *const mine[] = { "*/vendor/*", NULL };

	ASSERT(ffm_an_src_library("/home/u/app/src/../vendor/lib.h", mine));
	ASSERT(!ffm_an_src_library("/usr/local/cuda/bin/../targets/x86_64-linux/include/cuda_runtime.h", mine));
	ASSERT_OK(setenv("FFM_SRC_LIBRARY", "*/third_party/*:*/vendor/*", 1));
	ASSERT(ffm_an_src_library("/home/u/app/vendor/x/../lib.h", NULL));
	ASSERT(!ffm_an_src_library("/home/u/app/main.cu", NULL));
	unsetenv("FFM_SRC_LIBRARY");
}

TEST(python_library)
{
	unsetenv("FFM_PY_LIBRARY");
	ASSERT(ffm_an_py_library("/usr/lib/python3.11/threading.py", NULL));
	ASSERT(ffm_an_py_library("/venv/lib/python3.12/site-packages/torch/_tensor.py", NULL));
	ASSERT(ffm_an_py_library("/venv/bin/../lib/python3.12/site-packages/x.py", NULL));
	ASSERT(!ffm_an_py_library("/home/u/train.py", NULL));
	ASSERT(!ffm_an_py_library("/home/u/lib/../train.py", NULL));
}

TEST_MAIN()
