/* urlseen_redis.h - `pagededup urlseen --redis`: the batches of urlseen.c
 * tested and recorded in the filter on Redis (core/urlseen/rfilter.h)
 * instead of a filter file. */
#ifndef PD_URLSEEN_REDIS_H
#define PD_URLSEEN_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Exit status of urlseen when the cluster cannot be reached (at the start,
 * or for longer than --redis-wait during the run). */
#define URLSEEN_EXIT_UNREACHABLE 3

struct urlseen_redis_opts {
	const char *seeds;   /* HOST:PORT[,HOST:PORT...] */
	const char *name;    /* the filter's name on the cluster */
	double fpr;
	bool fpr_given;
	uint64_t expected;   /* 0: default */
	uint32_t lines;      /* 0: default */
	uint32_t leaf_kib;   /* 0: default */
	uint32_t min_leaves; /* 0: default */
	int wait_ms;         /* how long to wait for an unreachable cluster; 0: default */
	int timeout_ms;      /* a node's answer; 0: default */
	bool check;
};

struct urlseen_redis;

/* Connect and open (or make) the filter. Reports its errors on stderr;
 * returns 0 or the exit status to end with. */
int urlseen_redis_open(const struct urlseen_redis_opts *o, struct urlseen_redis **out);
/* Test (and record, without check) n keys: seen[i] false for the URLs to
 * print. A URL without an answer is printed (seen false) and counted, the
 * batch's count reported on stderr. Returns 0, or the exit status to end
 * with once the batch's new URLs are printed (the cluster unreachable:
 * the URLs it could not test are neither printed nor recorded; the message
 * says which lines to give again). first_line and last_line name the
 * batch's lines in input for that message. */
int urlseen_redis_batch(struct urlseen_redis *u, const uint8_t *keys, size_t n, bool *seen,
			const char *input, uint64_t first_line, uint64_t last_line);
/* Count what is left to count (the end of a run); reports its errors. */
int urlseen_redis_finish(struct urlseen_redis *u);
/* Figures for --stats, on stderr. */
void urlseen_redis_stats(struct urlseen_redis *u);
/* URLs printed without an answer so far. */
uint64_t urlseen_redis_lost(const struct urlseen_redis *u);
void urlseen_redis_close(struct urlseen_redis *u);

#endif
