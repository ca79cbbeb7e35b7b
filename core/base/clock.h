/* clock.h - a clock's reading in nanoseconds, and the deadline of a timed
 * wait (pthread_cond_timedwait takes an absolute time on the clock its
 * condition variable was made with). */
#ifndef PD_CLOCK_H
#define PD_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t pd_clock_ns(clockid_t clock)
{
	struct timespec t;
	clock_gettime(clock, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* The time ns nanoseconds from now on `clock`. */
static inline struct timespec pd_deadline_ns(clockid_t clock, uint64_t ns)
{
	struct timespec t;
	clock_gettime(clock, &t);
	t.tv_sec += (time_t)(ns / 1000000000u);
	t.tv_nsec += (long)(ns % 1000000000u);
	if (t.tv_nsec >= 1000000000L) {
		t.tv_sec++;
		t.tv_nsec -= 1000000000L;
	}
	return t;
}

#endif
