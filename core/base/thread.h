/* thread.h - how the daemon's background threads present themselves to
 * the system.
 *
 * The threads whose work can wait (the delta step, the dictionary trainer,
 * the compactor) run at THREAD_BACKGROUND_NICE, so that on a machine of
 * few cores the threads that answer the kernel, whose latency a crawler's
 * close() waits for, win the CPU when both want it. Not the signer: a
 * close() past its bound signs itself, so its falling behind slows the
 * writers. Measured on two cores (make bench's cp_dedup, io_uring, runs
 * alternated): pages/s at nice 0 1,123-1,880 (nine runs, mean 1,451), at
 * 10 1,436-2,059 (five, mean 1,776), at 19 1,469-1,821 (four, mean 1,597);
 * 11 of 12 pairs faster than nice 0, with a spread between runs of one
 * setting as large as the effect (tests/bench/README.md, "Background
 * threads' priority"). One writer timing each open-write-close
 * (tests/bench/write-latency.py): 3-15% faster in each of three pairs, the
 * 99th percentile lower, the slowest close() within the spread: a ring
 * thread waiting on a niced one (a group commit it joined) did not show.
 * The cost: a niced reader lasts longer when the cores are busy, and
 * LMDB's file grows while the pages freed meanwhile wait for it.
 * 10 rather than 19: under a load that keeps every core busy, a thread at
 * 10 still gets about a tenth of a core against one at 0 (19: 1.5%), so a
 * long crawl's dictionaries and compactions still come.
 */
#ifndef PD_THREAD_H
#define PD_THREAD_H

#include <pthread.h>
#include <stdbool.h>

#define THREAD_BACKGROUND_NICE 10

/* Name the calling thread (its CPU apart in /proc/PID/task) and lower its
 * scheduling priority by nice (0: as the process). */
void thread_background(const char *name, int nice);

/* Stop a thread that waits on cv under mu and leaves its loop once *stop
 * is set: *stop set under mu, cv signalled, then the thread joined. With
 * running (NULL: the thread was started), nothing when *running is false
 * (no thread to stop), and *running false once it is joined. */
void thread_stop_join(pthread_t thr, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop, bool *running);

#endif
