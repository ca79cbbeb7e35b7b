/* heap.h - the heap's free pages given back to the system.
 *
 * glibc's malloc gives memory back to the kernel only from the top of an
 * arena: pages freed inside an arena stay resident, unused, until
 * malloc_trim walks the arenas and releases them. The daemon frees memory
 * in bursts (a crawl's page buffers, the delta step's sweep of the
 * nursery, the kernel forgetting a crawl's inodes), so after a burst tens
 * of MiB can stay resident that nothing uses. Measured at the end of a
 * 1,000,000-page bench-scale run, the daemon idle and every inode
 * forgotten: RssAnon 77 MiB, of which malloc held 33 MiB in use; one
 * malloc_trim brought it to 42 MiB.
 *
 * Callers give back at the end of a burst, never on a hot path: a trim
 * walks every arena's free chunks, and a page given back costs a fault
 * and a zeroed page when it is used again.
 */
#ifndef PD_HEAP_H
#define PD_HEAP_H

#include <stdint.h>

/* Give the free pages of every malloc arena back to the system. */
void heap_give_back(void);
/* How many times the process has done so (stats, tests). */
uint64_t heap_give_backs(void);

#endif
