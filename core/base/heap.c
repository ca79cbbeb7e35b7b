/* heap.c - the heap's free pages given back to the system (heap.h). */
#include "heap.h"

#ifdef __GLIBC__
#include <malloc.h>
#endif

static uint64_t give_backs;

void heap_give_back(void)
{
#ifdef __GLIBC__
	malloc_trim(0); /* every arena, not only the caller's */
#endif
	__atomic_add_fetch(&give_backs, 1, __ATOMIC_RELAXED);
}

uint64_t heap_give_backs(void)
{
	return __atomic_load_n(&give_backs, __ATOMIC_RELAXED);
}
