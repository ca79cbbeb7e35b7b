/* ndelta.h - near-duplicate pages re-encoded as deltas against a stored
 * neighbour, after they are signed, off the close() path.
 *
 * A seal stores a page whole (compressed, blob.h). Once the signer has
 * committed its signature (sigq.h), the page's key joins a bounded
 * in-memory queue; a thread of its own takes keys from it in batches and,
 * for each page:
 *   1. asks the near index for candidates: the pages within the store's K
 *      of its simhash (near_find) and those sharing an LSH band of its
 *      shingle set (near_lsh_find), at most NDELTA_DEFAULT_CANDIDATES
 *      (-o delta_candidates);
 *   2. keeps those that can be a base (a packed, intact record, less
 *      than BLOB_DELTA_DEPTH deltas deep, of at most NDELTA_MAX_BYTES
 *      for a page of at most that size, of at most NDELTA_BIG_MAX_BYTES
 *      for a larger one) and ranks them by the rule (enum ndelta_rule);
 *   3. reads the page and the base, encodes the page with the base as
 *      zstd reference prefix (a page over a chunk: each chunk with a
 *      window of the base around its own place, pack.h's chunked
 *      deltas) and, only when that record is under
 *      NDELTA_GAIN_NUM/NDELTA_GAIN_DEN of the page's current one, appends
 *      it (synced under sync_blobs, as a seal's);
 *   4. when no candidate gives a delta under that threshold, tries the
 *      page (of one chunk) as a delta on the window: of the last
 *      NDELTA_WINDOW_POOL pages the step gave their records, the
 *      -o delta_window whose markup simhash (text/markup.h) is closest to
 *      the page's (blob_window_pick, blob_window_delta). A site's pages
 *      share their markup (menus, style sheets, scripts), which the index,
 *      built on the text, does not see; a crawl of many hosts writes them
 *      interleaved, so the markup, not the order, picks the pages. The
 *      best is kept when it saves NDELTA_WINDOW_MIN_GAIN bytes and passes
 *      the cold pass's depth rule (blob_cold.c: the deeper the base, the
 *      smaller the delta must be). The window is the step's, whichever
 *      thread does a batch (the thread, a drain, a helping close()), and
 *      only in memory: after a restart it starts empty;
 * then points each such page at its new record in one write transaction
 * per batch (blob_delta_move: the record must still be the one that was
 * re-encoded; the old one becomes dead bytes).
 *
 * The nursery (pack.h, blob.h). A page sealed while the store has a
 * nursery sits there, encoded cheaply, until this step writes its final
 * record into a main pack: the delta when one pays (under the gain
 * threshold of the page encoded whole at BLOB_FINAL_LEVEL), else the page
 * whole at that level; the nursery record is then dead, and a nursery pack
 * with nothing live is removed whole. A delta refused in the transaction
 * (the page got deltas of its own meanwhile) is followed by the whole move,
 * so every page leaves the nursery once.
 *
 * The queue is bounded (NDELTA_QUEUE): a key pushed when it is full is
 * dropped; no close() waits for the thread. A page outside the nursery
 * then stays whole. A page in the nursery is found again by the sweep
 * (ndelta_nursery_sweep), which the thread runs as soon as its queue
 * empties after keys were dropped, and whenever it has been idle for
 * NDELTA_KEPT_POLL_MS, and a clean close runs last (one sweep at a time:
 * two would encode the same pages twice): the waiting
 * records are those of the nursery packs that their page's fingerprint
 * record still names, so a crash or a restart loses none of them (the
 * queue itself is not persistent). While the thread falls behind, the
 * nursery grows up to its bound (BLOB_NURSERY_MAX_BYTES); past it, a
 * seal writes the page's final record itself (at PACK_DEFAULT_LEVEL), as
 * without a nursery, and such a page may still become a delta later.
 * Before that, from half the bound on, a close() of a new page does a
 * batch of the queue itself (ndelta_help) and removes the nursery packs
 * left empty, as a close() past the signer's bound signs (sigq.h): the
 * writers slow to the pace at which pages get their final records,
 * instead of writing records whole that the step replaces later (dead
 * bytes the compactor then copies around, beside the writers). One
 * close() helps at a time, with a cache of sets of its own kept from one
 * helper's batch to the next (the thread's is its alone): a second writer
 * meanwhile writes on, since the step's write transactions go one at a
 * time anyway; without the cache a helper decoded every candidate's set
 * afresh, 2.6 times the decodes a page of the thread's (which the page's
 * encoding outweighs: tests/bench/README.md, "One close() helps at a
 * time").
 *
 * The thread yields to writers (ndelta_yield_ns): while pages arrive
 * faster than it moves them (a full batch, the nursery grown since the
 * last) and the nursery holds less than half its bound, it rests
 * NDELTA_YIELD times as long as its batch took, so it takes at most a
 * quarter of a core from close() during a burst, and catches up when the
 * writers pause, the nursery passes half its bound, or at a clean close
 * (ndelta_drain). It rests between batches, never inside a transaction, so
 * no seal waits for a resting thread; keys pushed while its queue is full
 * are found again by the sweep, which rests between its batches by the
 * same rule (a drain's sweep does not). On two cores the step's final
 * encoding otherwise takes about a quarter of the daemon's CPU in a burst
 * of new pages (the issue-15 note has the profile).
 *
 * The same thread looks after bases that died (blob.h's kept bases): each
 * delta on a kept base is decoded and stored again on its own (the store's
 * dictionary codec), after which the base's record is freed. A delta is
 * never re-encoded against another base, so a page's chain only shortens.
 *
 * Errors are negative errno values.
 */
#ifndef PD_NDELTA_H
#define PD_NDELTA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/rec.h"
#include "store/store.h"

#define NDELTA_QUEUE 4096          /* pages waiting; beyond, left whole */
#define NDELTA_BATCH 16            /* pages moved per write transaction */
#define NDELTA_CANDIDATES 32       /* candidates examined per page at most
				    * (-o delta_candidates up to it) */
/* ... and by default. Measured (a cp -r into a fresh mount, compact --all,
 * the issue-15 note): with 8 rather than 32 the daemon's CPU per page was
 * 11-17% lower on corpus/a, scipy's, libstdc++'s and OpenJDK's
 * documentation, the packs' live records within 0.4%; at scale the
 * step's cost per page stops growing once a page's versions pass the
 * bound, four times sooner. */
#define NDELTA_DEFAULT_CANDIDATES 8
/* The window (-o delta_window=N, 0 for none): a page to which no
 * neighbour gives a delta worth keeping is tried as a delta on N of the
 * NDELTA_WINDOW_POOL pages the step gave their records last, those whose
 * markup is closest to its own (blob_window_pick). Measured
 * (tests/bench/README.md, "The delta step's window"): with N = 2, on four
 * sets of documentation the packs as written 1.4-16% smaller, for 45-65%
 * more of the step's CPU; four tries gained 0-1.5 points more for twice
 * the added CPU of two. On by default with N = 2: the store 2-3 points
 * of its gzip smaller as written (corpus/a 0.709-0.712 -> 0.689-0.696)
 * for about a sixth more of the daemon's CPU. The nursery's sweep, which
 * most pages of a cp -r reach, rests for writers as the queue's batches
 * do, so the copy does not pay that CPU while it runs. */
#define NDELTA_DEFAULT_WINDOW 2
#define NDELTA_WINDOW_POOL 16
#define NDELTA_WINDOW_MAX 64 /* BLOB_COLD_WINDOW_MAX */
/* A delta on the window is kept only when it saves this many bytes or
 * more: a delta costs LMDB its link row ("dlnk", 44 bytes of key, blob.h)
 * and a read the decode of its base, which a few bytes of a small page
 * do not pay for. */
#define NDELTA_WINDOW_MIN_GAIN 128
#define NDELTA_TRIALS 3            /* bases tried by NDELTA_RULE_TRIAL */
#define NDELTA_MAX_BYTES (256u << 10) /* a page of at most this (one chunk,
				       * PACK_DEFAULT_CHUNK_SHIFT) is one frame
				       * against its whole base, so its base is
				       * no larger; a larger page is a chunked
				       * delta against any base (pack.h) */
#define NDELTA_BIG_MAX_BYTES (16u << 20) /* pages and bases larger stay whole:
					  * a whole decode (signing, this step,
					  * fsck --deep) holds the
					  * page and every base of its chain,
					  * BLOB_DELTA_DEPTH + 1 buffers, so at
					  * most 80 MiB; the corpus's largest
					  * page is 6 MB */
#define NDELTA_GAIN_NUM 3          /* a delta is kept under 3/4 of the */
#define NDELTA_GAIN_DEN 4          /* page's current record */
#define NDELTA_KEPT_POLL_MS 1000   /* the thread looks for kept bases this often */
#define NDELTA_YIELD 3             /* while pages arrive, the thread rests this
				    * many times as long as its last batch took */
#define NDELTA_YIELD_MAX_MS 250    /* ... and at most this long at a time */

/* How the base is chosen among the candidates (measured: the issue-15
 * note). */
enum ndelta_rule {
	NDELTA_RULE_DEFAULT = 0,   /* NDELTA_RULE_RESEMBLANCE */
	NDELTA_RULE_OFF,           /* no deltas */
	NDELTA_RULE_SIMHASH,       /* the smallest simhash distance (ties: resemblance) */
	NDELTA_RULE_RESEMBLANCE,   /* the highest estimated shingle resemblance */
	NDELTA_RULE_TRIAL,         /* the smallest delta of the NDELTA_TRIALS most resembling */
};
/* "off", "simhash", "resemblance", "trial" -> the rule; -EINVAL. */
int ndelta_rule_parse(const char *name, unsigned *rule);
const char *ndelta_rule_name(unsigned rule);

struct ndelta;

/* Start the thread on a writable store (nothing when the rule is off:
 * *out NULL). */
int ndelta_start(struct store *st, struct ndelta **out);
/* Stop it; what is queued stays whole. NULL is a no-op. */
void ndelta_stop(struct ndelta *d);
/* Do every page queued now in the caller's thread, beside the thread
 * (a clean close). */
void ndelta_drain(struct ndelta *d);
/* Page k was signed: queue it (dropped when the queue is full). */
void ndelta_push(struct ndelta *d, const struct blobkey *k);
/* One batch from the head of the queue done in the caller's thread,
 * beside the thread, then the nursery packs it emptied removed (a close()
 * while the nursery is behind: blob_nursery_behind). The pages done (0:
 * the queue was empty, another close() was helping, or d NULL). */
size_t ndelta_help(struct ndelta *d);

/* What the thread did (tests, benchmarks). */
struct ndelta_counts {
	uint64_t queued, dropped, tried, stored, kept_rebased;
	uint64_t window;                    /* of the deltas stored, those on a page of the window */
	uint64_t cpu_ns; /* CPU time of the batches and sweeps (the thread's) */
	uint64_t bytes_before, bytes_after; /* records replaced by deltas */
	uint64_t chunked, chunked_before, chunked_after; /* of them, pages over a chunk */
	uint64_t moved_whole, whole_before, whole_after; /* out of the nursery whole */
	uint64_t swept;                     /* nursery records found waiting by a sweep */
	uint64_t roomless;                  /* pages of batches not done: no room (store_room_for_background) */
	uint64_t rests;                     /* rests yielded to writers */
	uint64_t helped;                    /* pages done by close() (ndelta_help) */
	uint64_t waiting;                   /* in the queue now */
	uint64_t candidates;                /* candidates examined: a page's sets read and compared */
	uint64_t set_decoded, set_hits;     /* sets resolved by decoding, and from the step's cache */
};
void ndelta_counts(struct ndelta *d, struct ndelta_counts *out);

/* One page now, in the caller's thread: 0 (stored as a delta or left),
 * or -errno. */
int ndelta_page(struct store *st, unsigned rule, const struct blobkey *k, struct ndelta_counts *c);
/* The nursery's waiting records (pack.h: found from the packs and the
 * fingerprint table, so after a restart too) given their final records
 * (a delta by the rule, else whole), then the nursery packs with nothing
 * live removed whole. The thread runs it whenever its queue is idle, and
 * a drain at the end. */
int ndelta_nursery_sweep(struct store *st, unsigned rule, struct ndelta_counts *c);
/* Store every delta on a kept base again on its own (the bases are freed
 * with their last delta). *moved: records re-encoded. */
int ndelta_rebase_kept(struct store *st, uint64_t *moved);

/* How long the thread rests after a batch of `pages` that took batch_ns,
 * the nursery having held nursery_before bytes at the end of the previous
 * batch and nursery_now at the end of this one, of a bound of
 * nursery_max: NDELTA_YIELD x batch_ns (at most NDELTA_YIELD_MAX_MS) after
 * a full batch (NDELTA_BATCH pages: writers outpace the step) while the
 * nursery grew and holds less than half its bound; else 0. In ns. (Pages
 * written one at a time keep batches of one, taken in the order written,
 * so that a page is not in one batch with its own near-duplicate, which
 * could then take it as base before it gets its own delta.) */
uint64_t ndelta_yield_ns(size_t pages, uint64_t batch_ns, uint64_t nursery_before, uint64_t nursery_now,
			 uint64_t nursery_max);

#endif
