/* rfilter.h - the URL-seen filter kept on Redis (a cluster or one plain
 * server), shared by crawlers on many hosts: `pagededup urlseen --redis`.
 *
 * The filter is a tree of leaves, each a Bloom filter of plain bits held in
 * one Redis string, the leaves spread over the cluster's hash slots by
 * their key names. A URL (its 64-bit key, as for the local filter) is
 * routed to one leaf per level (seed 004's location hashes, one per level)
 * and its bits lie in one or two 64-byte lines of that leaf (bitpos.h).
 *
 * Test and record in one command. A URL is tested and recorded with one
 * BITFIELD on its leaf: "GET u8 0" (the leaf's state, below) and then one
 * "SET u1 OFFSET 1" per bit, which answers each bit's old value. Redis runs
 * a command whole, so when hosts race on one URL exactly one of them sees
 * a bit that was 0 and prints the URL as new; the others see all ones.
 *
 * Growth without a lock (seed 004's split, without its rehash). Bits
 * cannot be moved to other leaves without the keys, and keeping the keys
 * in Redis would take four times the memory of the bits; so a full leaf is
 * frozen, as scalable Bloom filters freeze a full filter: it is kept,
 * read-only, and new URLs of its range go to its children at the next
 * level. A URL is new if it is in no leaf of its path. Levels get tighter
 * rates so that a path's rates add up to at most the rate asked for: level
 * d is made for fpr * 3/4 * 4^-d (level 0, where a filter sized well keeps
 * every URL, gets most of the rate; deeper levels take more bits per key:
 * the price of growing without the keys, which a good --expected avoids).
 * Level 0's leaves have room for their mean share of --expected and for
 * the spread between leaves (routing is random), so that a filter sized
 * for its URLs does not split at the end.
 *
 * A leaf's state lives in the leaf (no separate leaf table to keep in
 * step): line 0 is its header, the bits are lines 1.. . Header, version 1
 * (BITFIELD offsets, Redis bit order):
 *   u8 at bit 0      state: 0 active, 1 frozen
 *   u32 at bit 32    keys recorded (added by the hosts in bunches, below)
 *   the rest         zero, reserved
 * A split of leaf L (level d, number i) into C children:
 *   1. each child (level d+1, numbers i*C .. i*C+C-1) is made if it does
 *      not exist, whole and zeroed (a Lua script on the child's key:
 *      EXISTS, else SETRANGE at its last byte), so it is never grown piece
 *      by piece (Redis would over-allocate a growing string);
 *   2. L's state is set to frozen (BITFIELD SET u8 0 1).
 * Both steps are idempotent and each is one command on one key; any host
 * may run them, several at once. A host that dies between them leaves
 * children nobody uses yet: the next host to find L full does the split
 * again. Every host sees a split at once: the state is read in the same
 * command that records a URL, so the first command after step 2 tells its
 * sender that L is frozen.
 *
 * Why exactly one host prints a URL, across splits. A host knows some
 * leaves to be frozen (it learnt it from a state it read). For a URL it
 * first reads (GET) the leaves of the path it knows frozen; all bits set in
 * one: seen. Otherwise it records the URL in the first leaf not known
 * frozen. Old bits all set: seen. Some bit was 0 and the leaf active: new.
 * Some bit was 0 but the leaf frozen (the host did not know): the host has
 * written into a frozen leaf; it records the URL in the child, without
 * reading the frozen leaf again (its own write is there now), and the
 * child's answer decides. A frozen leaf changes only by such writes, and
 * whoever writes a URL's bits into a frozen leaf first goes on to the
 * child, so "all bits set in a frozen leaf" always means that some host
 * printed or will print the URL (or a false positive); and a child's bits
 * are set only by a host that found the URL in no frozen leaf before it.
 * The cost of not knowing: bits written into frozen leaves, at most one
 * batch per host per split (they raise those leaves' rates a little).
 * Case by case: say hosts A and B both print u as new with an answer. Each
 * wrote u's bits into a leaf that answered "active" and had a 0 bit: A into
 * X, B into Y, both on u's path. X = Y is impossible (the later of the two
 * commands would find every bit set). Else say X is above Y: B went past
 * X either by writing into it (then X answered "frozen", so B's write came
 * after A's, which found X active, and B would have found every bit set)
 * or by reading it as a leaf it knew frozen (then X was frozen before that
 * read, the read found a 0 bit so it came before A's write, and A's write
 * would have answered "frozen"). This rests on each leaf's commands
 * running one at a time in one order (one primary per slot), so it holds
 * across resharding; what breaks it is a lost answer (the URL is printed
 * without one: RFILTER_LOST, reported) and a failover (below).
 * tests/unit/cluster/test_cluster.c steps hosts through these orders.
 *
 * Keys are counted in bunches: a host adds to a leaf's count (BITFIELD
 * INCRBY) when it has recorded a bunch there (1/256 of the leaf's
 * capacity) and at the end of its run; the INCRBY answers the new count,
 * and whoever sees it at or past the leaf's capacity splits the leaf. A
 * host killed with a bunch uncounted makes its leaf split a little late.
 *
 * What a failover can lose. Redis replicates asynchronously: a primary
 * that dies may have acknowledged writes its replica never got. After the
 * replica takes over, the URLs those writes recorded are not in the filter
 * and can be printed as new once more (by any host), and a state change
 * (a split's freeze, a count) can be undone, which costs a split done
 * twice and some rate, never a URL dropped. How many: what the primary
 * acknowledged in the last moments before it died, typically the batches
 * in flight on it (replication is usually a few milliseconds behind). A
 * freeze undone adds a few: until the leaf is frozen again (hosts that
 * knew it frozen find it active, write there again, and the first bunch
 * counted there splits it once more), a URL its children got meanwhile
 * can be new once more in the leaf: about a bunch per host more.
 *
 * Keys in Redis (NAME is the filter's name, letters, digits, '.', '_',
 * '-'; no hash tag, so the leaves spread over all slots):
 *   NAME:meta      the parameters, a string written once (SET NX):
 *                  "pagededup-urlseen-redis 1 fpr=F lines=L c0=C0
 *                  leafbytes=B children=C seed=S expected=E"
 *   NAME:D:I       leaf I of level D (level 0 has C0 leaves), B bytes
 *
 * Errors are negative errno values, with a sentence in err.
 */
#ifndef PD_RFILTER_H
#define PD_RFILTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cluster/cluster.h"

#define RFILTER_MAX_LEVELS 12
#define RFILTER_NAME_MAX 64

struct rfilter_params {
	double fpr;             /* overall rate; default 1e-4 */
	uint64_t expected;      /* URLs level 0 is made for; default 1e6 */
	uint32_t lines_per_key; /* 1 or 2; default 2 */
	uint32_t max_leaf_kib;  /* a level-0 leaf's largest size; default 1024 */
	uint32_t min_leaves;    /* level-0 leaves at least (spread over the nodes); default 64 */
};
void rfilter_params_default(struct rfilter_params *p);

struct rfilter;

/* Open the filter NAME on cluster c, making it with p when it does not
 * exist (create; otherwise -ENOENT). p->fpr, when fpr_given, must match
 * an existing filter's (-EINVAL). Level 0's leaves are made if missing (a
 * host that died while making them left the rest to the next). */
int rfilter_open(struct cluster *c, const char *name, const struct rfilter_params *p,
		 bool fpr_given, bool create, struct rfilter **out, char *err, size_t errlen);
void rfilter_close(struct rfilter *f);

enum rfilter_verdict {
	RFILTER_SEEN = 0,
	RFILTER_NEW = 1,   /* recorded here first (or not seen, with record false) */
	RFILTER_LOST = 2,  /* no answer came: to be taken as new (it may also be
			    * printed by another host); it may have been recorded */
	RFILTER_NOT_RUN = 3, /* the cluster could not be reached: not tested, not recorded */
};

/* Test n keys (16 bytes each, as for bitfilter) and, with record, record
 * them: verdict[i] says what key i is. Returns 0, -EHOSTUNREACH when some
 * keys could not be tested (their verdict RFILTER_NOT_RUN; the others'
 * verdicts hold), -ENOMEM. A key that appears twice in one call is new at
 * most once. */
int rfilter_check(struct rfilter *f, const uint8_t *keys, size_t n, bool record, uint8_t *verdict);
/* Add the counts not yet added (at the end of a run). */
int rfilter_flush(struct rfilter *f);

struct rfilter_stats {
	double fpr;
	uint32_t k0, lines_per_key, c0, children;
	uint64_t leaf_bytes, cap0;      /* a leaf's size and level 0's capacity per leaf */
	uint64_t expected;
	uint64_t frozen_known;          /* leaves this host knows frozen */
	uint64_t splits;                /* splits this host made */
	uint64_t stray;                 /* URLs this host wrote into leaves already frozen */
	uint64_t lost;                  /* URLs without an answer, taken as new */
	uint64_t levels_full;           /* leaves at the last level past their capacity */
};
void rfilter_get_stats(const struct rfilter *f, struct rfilter_stats *st);

/* Level 0's leaf size for the parameters, and the bits per key (for tests
 * and the benchmark's theory). */
int rfilter_plan(const struct rfilter_params *p, uint32_t *c0, uint64_t *leaf_bytes, uint32_t *k0);

#endif
