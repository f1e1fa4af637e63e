/* SPDX-License-Identifier: MIT */
/*
 * What every library of ffm does the same way: growing arrays, reading the monotonic clock,
 * making directories. Like oatab.h, the lowest floor, so that no library grows its own copy.
 */
#ifndef FFM_UTIL_H
#define FFM_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Room for @need elements of @size bytes in the array *@arr of capacity *@cap: the capacity
 * doubles (from 8) until it holds them, the new room zeroed. 0, or -ENOMEM with the array
 * unchanged. */
int ffm_grow(void **arr, size_t *cap, size_t need, size_t size);
#define FFM_GROW(arr, cap, need) ffm_grow((void **)&(arr), &(cap), (need), sizeof(*(arr)))

/* CLOCK_MONOTONIC (the clock of the BPF records) in nanoseconds, in seconds. */
uint64_t ffm_now_ns(void);
double ffm_now_s(void);

/* mkdir -p: @path with @mode, the directories above it 0755 where missing. 0 or -errno. */
int ffm_mkdir_p(const char *path, mode_t mode);

#endif
