/* bitfilter.h - a file-backed Bloom filter of plain bits that grows with the
 * set it holds, at a fixed overall false-positive rate: the URL-seen filter
 * of `pagededup urlseen`.
 *
 * The filter is a set of leaves reached through a directory indexed by the
 * leading bits of a routing hash (extendible hashing, as the dynamic
 * splittable Bloom filter of seed 004 routes keys with its location hashes).
 * A key lives in exactly one leaf, so a lookup touches one leaf: two 64-byte
 * lines of it by default (lines_per_key 2), one with lines_per_key 1.
 *
 * Growing without losing keys. Bits cannot be redistributed, so every leaf
 * also keeps, on disk, the 64-bit keys it holds (a log of 8 bytes per key,
 * read only when the leaf is rebuilt; it is never mapped for lookups). When
 * the filter's overall rate, computed from each leaf's exact key count,
 * would pass the target, the worst leaf is rebuilt from its log 1.3 times
 * larger, or, past the largest leaf size, split into two children that each
 * take half of its routing range (seed 004's split, with the rehash that it
 * describes). The overall rate is the mean of the leaves' rates weighted by
 * the share of the routing space each one covers, which is exactly the
 * rate a new key meets; the filter keeps it at or below the target. Growing
 * one leaf at a time by a small factor keeps the leaves' fill staggered, so
 * memory stays close to what a filter sized in advance would take (see
 * bitfilter.c for the figures and the choices).
 *
 * The filter key is a 16-byte hash (XXH3-128 of a normalised URL, low half
 * first, each half little-endian); the filter folds it to 64 bits, from
 * which every position is derived, and logs those 8 bytes.
 *
 * Concurrency: several processes may share one filter file. Every access
 * happens between bitfilter_lock() and bitfilter_unlock(), which take an
 * flock(2) on the file, shared (tests only) or exclusive (tests and adds).
 * A process that finds the layout changed by another (a leaf rebuilt or
 * split) maps the new leaves when it takes the lock. One struct bitfilter
 * is for one thread at a time.
 *
 * Crash behaviour: every change is ordered so that a process killed at any
 * point leaves a usable file (at worst some space that is no longer
 * reachable, and the keys of the batch it was adding recorded or not).
 * bitfilter_sync() makes the file durable; without it a machine crash may
 * lose the last changes the kernel had not yet written back.
 *
 * The file is little-endian and the code builds on little-endian hosts only.
 * Errors are negative errno values; -EUCLEAN means a damaged file.
 */
#ifndef PD_BITFILTER_H
#define PD_BITFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BITFILTER_LINE_BYTES 64
#define BITFILTER_LINE_BITS 512
#define BITFILTER_MAX_K 32
/* Leaves and routing depth the file has room for: 16384 leaves of the
 * default largest size (32 MiB) hold about 2e11 keys at a 1e-4 rate; past
 * that, leaves grow without splitting. */
#define BITFILTER_MAX_LEAVES 16384
#define BITFILTER_MAX_DEPTH 16

struct bitfilter_params {
	double fpr;              /* overall false-positive rate, 0 < fpr < 0.5; default 1e-4 */
	uint64_t expected;       /* keys the first leaves are sized for; default 1,000,000 */
	uint32_t lines_per_key;  /* 1 or 2; default 2 */
	uint32_t max_leaf_lines; /* a leaf that would grow past this splits; default 2^19 (32 MiB) */
	uint64_t seed;           /* seed of the position hashes; default a fixed value */
};
void bitfilter_params_default(struct bitfilter_params *p);

struct bitfilter;

/* Create a filter file at path, which must not exist (-EEXIST: it does; the
 * file appears whole or not at all, so two processes racing to create one
 * filter get one file, and the loser -EEXIST). path NULL: an unlinked
 * temporary file in $TMPDIR or /tmp, gone at close. -EINVAL for parameters
 * out of range. */
int bitfilter_create(const char *path, const struct bitfilter_params *p, struct bitfilter **out);
/* Open an existing filter file. -EINVAL if it is not one, -EUCLEAN if its
 * structure is damaged. readonly: bitfilter_add and exclusive locks fail
 * with -EROFS. */
int bitfilter_open(const char *path, bool readonly, struct bitfilter **out);
void bitfilter_close(struct bitfilter *f);
/* fsync the file (the bits are written through a shared mapping). */
int bitfilter_sync(struct bitfilter *f);

/* Take the file lock (exclusive for adds) and bring this process's view up
 * to date. -EROFS for an exclusive lock on a read-only filter, -EUCLEAN if
 * the file is damaged (the lock is released then). Not recursive. */
int bitfilter_lock(struct bitfilter *f, bool exclusive);
void bitfilter_unlock(struct bitfilter *f);

/* With a lock held: seen[i] = key i (16 bytes at keys + 16 i) may have been
 * added before, or equals an earlier key of this same call that was not.
 * Returns how many are not seen (new). Lines are prefetched several keys
 * ahead, so the cache misses of a batch overlap. */
size_t bitfilter_check(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen);
/* With the exclusive lock held: record n keys (the new ones from
 * bitfilter_check; a key added twice is stored twice). Grows leaves before
 * returning when the overall rate would pass the target. -EROFS on a
 * read-only filter, -EPERM without the exclusive lock, -ENOSPC when the
 * disk is full (the keys before the failing one are recorded), -EUCLEAN on
 * a damaged file. */
int bitfilter_add(struct bitfilter *f, const uint8_t *keys, size_t n);
/* With the exclusive lock held, after bitfilter_check(f, keys, n, seen):
 * record the keys it found new (seen[i] false), reusing the leaves and
 * lines the check computed (without an intervening check or lock change;
 * otherwise it works as bitfilter_add on those keys). Errors as for
 * bitfilter_add, and -ENOMEM. */
int bitfilter_record(struct bitfilter *f, const uint8_t *keys, size_t n, const bool *seen);
/* Lock, check, record the new keys, unlock: the one-call form. *nnew (may
 * be NULL) gets the number of new keys. */
int bitfilter_check_and_add(struct bitfilter *f, const uint8_t *keys, size_t n, bool *seen,
			    size_t *nnew);

struct bitfilter_stats {
	uint64_t keys;            /* keys recorded */
	uint64_t leaves;
	uint32_t depth;           /* directory depth */
	uint32_t k;               /* bits per key */
	uint32_t lines_per_key;
	uint32_t max_leaf_lines;
	double target_fpr;        /* the rate asked for */
	double model_fpr;         /* the rate now, from the leaves' counts */
	uint64_t bits_bytes;      /* the leaves' bits: what lookups use (memory) */
	double theoretical_bytes; /* a classic Bloom filter's optimum for keys at target_fpr:
				   * keys * ln(1/fpr) / ln(2)^2 / 8 */
	uint64_t log_bytes;       /* the key logs on disk */
	uint64_t file_bytes;      /* the file's length (it may have holes) */
	uint64_t free_bytes;      /* free space inside the file, for reuse */
	uint64_t lost_bytes;      /* space that could not be tracked for reuse */
	uint64_t grows, splits;   /* leaf rebuilds so far */
};
/* With a lock held. */
int bitfilter_stats(struct bitfilter *f, struct bitfilter_stats *st);

/* Check the file's structure (directory, leaves, key logs, free space): 0
 * or -EUCLEAN, with a description in msg (msglen bytes) when msg is not
 * NULL. With a lock held. */
int bitfilter_verify(struct bitfilter *f, char *msg, size_t msglen);

/* The model: false-positive rate of one leaf holding `keys_per_line` keys
 * per line on average (Poisson load per line, a key's bits distinct within
 * each line, lines_per_key independent lines). */
double bitfilter_model_fpr(uint32_t k, uint32_t lines_per_key, double keys_per_line);
/* The k (a multiple of lines_per_key, <= BITFILTER_MAX_K) that holds the
 * most keys per line at rate fpr, and that load. -EINVAL out of range. */
int bitfilter_best_k(double fpr, uint32_t lines_per_key, uint32_t *k, double *keys_per_line);

#endif
