/* SPDX-License-Identifier: MIT */
/* Growing heap arrays for ffmctl's verbs (systemd's GREEDY_REALLOC, smaller). */
#ifndef FFMCTL_GROW_H
#define FFMCTL_GROW_H

#include <errno.h>
#include <stdlib.h>

/* Room for element @n of the array *@arr of *@cap elements of @size bytes: doubles the
 * capacity (starting at @first) when full. 0, or -ENOMEM with the array unchanged. */
static inline int ffmctl_grow(void **arr, size_t *cap, size_t n, size_t size, size_t first)
{
	size_t c;
	void *p;

	if (n < *cap)
		return 0;
	c = *cap ? *cap * 2 : first;
	p = realloc(*arr, c * size);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = c;
	return 0;
}
#define FFMCTL_GROW(arr, n, cap, first) ffmctl_grow((void **)&(arr), &(cap), (n), sizeof(*(arr)), (first))

#endif
