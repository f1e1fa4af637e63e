/* SPDX-License-Identifier: MIT */
/*
 * Stands for a CUDA toolkit header (Thrust's reduce to the host, cuBLAS's host pointer mode):
 * a template whose code the compiler inlines into the user's function, which copies a device
 * result back and waits for it on the library's stream. It lives under include/cccl/ so that
 * ffm's default --src-library patterns take it for the toolkit's: a call site in it is named at
 * the user's line that calls it, with this header's frames kept in the stack.
 */
#ifndef WL_REDUCE_H
#define WL_REDUCE_H

#include "wl.h"

namespace wl_cccl {

/* Two levels deep, as Thrust's are many: the copy in a helper that the entry point inlines. */
template <typename T> __attribute__((always_inline)) inline void copy_back(T *v, CUdeviceptr src, CUstream s)
{
	CK(cuMemcpyDtoHAsync(v, src, sizeof(*v), s));
	CK(cuStreamSynchronize(s));
}

template <typename T> __attribute__((always_inline)) inline T read_to_host(CUdeviceptr src, CUstream s)
{
	T v;

	copy_back(&v, src, s);
	return v;
}

} // namespace wl_cccl

#endif
