/* blob.h - blobs and their fingerprint records.
 *
 * A blob is one distinct content, named by its blobkey. Its bytes are a
 * record in a pack (format 2, FPREC_PACKED: pack.h; appended, and synced
 * under sync_blobs, before the commit that first refers to it), or, in a
 * store made by format 1 and not converted yet, an immutable file under
 * objects/ (written in staging/ and renamed in before that commit, removed
 * after the commit that drops its last reference). Its record in
 * `fingerprints` carries the reference count (the number of inodes on
 * it), size, XXH3-128, the filter positions, the simhash slot and the
 * place of its pack record, and, for a blob of one file (format 7), that
 * file's inode; `blob_inodes` lists the inodes of a blob of two or more
 * (store_blob_inodes, store.h, answers for both).
 *
 * The functions taking a struct wtx run inside a write transaction.
 *
 * Blob storage knows nothing of what is built on blobs (the near-duplicate
 * index, the signer): those register a blob_listener and hear, inside the
 * transaction, of every blob added and every blob whose last reference went.
 */
#ifndef PD_BLOB_H
#define PD_BLOB_H

#include <stdbool.h>
#include <stdint.h>

#include "base/fp.h"
#include "store/rec.h"
#include "store/store.h"

/* Called in the write transaction that adds or releases a blob; an error
 * takes the transaction down. */
struct blob_listener {
	/* A new record r (refcount 1) was stored under k. */
	int (*added)(struct wtx *w, const struct blobkey *k, const struct fprec *r);
	/* The last reference to k went; r is its record, now deleted. */
	int (*released)(struct wtx *w, const struct blobkey *k, const struct fprec *r);
	/* dep's record no longer hangs on base (its link row went: the record
	 * was freed, healed, or stored again on its own); may be NULL. */
	int (*unlinked)(struct wtx *w, const struct blobkey *base, const struct blobkey *dep);
	/* dep's record was made a delta on base by the compactor's window
	 * (blob_delta_link_cold: the link row is in, the record's new place
	 * follows in the same transaction); may be NULL. The delta step's
	 * moves (blob_delta_move) are not told: their caller knows them, and
	 * does what a listener would with the sets it holds already. */
	int (*linked)(struct wtx *w, const struct blobkey *base, const struct blobkey *dep);
};

/* Register l on st (at open, before any write): -E2BIG past
 * STORE_MAX_PARTS listeners. */
int blob_listen(struct store *st, const struct blob_listener *l);

/* Blob storage as a part of the store (store.h): after an unclean stop, and
 * at a close where a removal failed, the blob files no record names are
 * removed (blob_part.c). */
extern const struct store_part blob_part;

int blob_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *out);
/* blob_get in a read transaction of its own: the record of k as committed
 * now (-ENOENT: none). */
int blob_read(struct store *st, const struct blobkey *k, struct fprec *out);
int blob_put(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r);

/* One more inode (ino) on an existing blob. */
int blob_ref(struct wtx *w, const struct blobkey *k, uint64_t ino);
/* One inode fewer; the last reference removes the record, its filter
 * counts, its near rows or its sigq row, and (after the commit) the file. */
int blob_unref(struct wtx *w, const struct blobkey *k, uint64_t ino);
/* Record a new blob whose file is already in place, referenced by ino;
 * in_filter: add its positions to the filter. Its near rows (a record with
 * a simhash) or its sigq row (FPREC_SIG_PENDING) are added too. */
int blob_insert(struct wtx *w, const struct blobkey *k, struct fprec *r, uint64_t ino, bool in_filter);

/* Probe `fingerprints` for content fp. found: *k is the matching blob.
 * Otherwise *k is the key a new blob of that content gets (variant 0, or one
 * past the highest variant of that MD5), and *collision tells whether a
 * record with the same MD5 but another size or XXH3-128 was seen. */
int blob_find(MDB_txn *txn, struct store *st, const struct fp *fp, struct blobkey *k, bool *found,
	      bool *collision);
/* The key a new, never-shared copy of fp gets (-o nodedup). */
int blob_next_variant(MDB_txn *txn, struct store *st, const uint8_t md5[16], struct blobkey *k);

/* A descriptor holding blob k's bytes, read-only: its file (format 1), or
 * an anonymous memory file its pack record was decoded into (checked
 * against its XXH3-128). -EIO when the bytes cannot be had intact. */
int blob_open(struct store *st, const struct blobkey *k);
/* The same with the record in hand (no transaction of its own). */
int blob_open_rec(struct store *st, const struct blobkey *k, const struct fprec *r);

/* ---- packed blobs (blob_pack.c) ---------------------------------------- */

/* Deltas are taken against a base at most this many deltas deep: a read
 * decodes at most BLOB_DELTA_DEPTH + 1 records. */
#define BLOB_DELTA_DEPTH 4

/* Live bytes and records of a pack, as of the transaction's snapshot. */
struct blob_pack_live {
	uint64_t bytes, records;
};
int blob_pack_live_get(MDB_txn *txn, struct store *st, uint32_t id, struct blob_pack_live *out);
int blob_pack_live_put(MDB_txn *txn, struct store *st, uint32_t id, const struct blob_pack_live *l);
/* Count record r in (sign > 0) or out of its pack's live totals and its
 * dictionary's live records. */
int blob_pack_account(struct wtx *w, const struct fprec *r, int sign);
void blob_rec_loc(const struct fprec *r, struct pack_loc *loc);
void blob_rec_set_loc(struct fprec *r, const struct pack_loc *loc, uint32_t dict);
/* Decode packed blob k (record r) into out (r->size bytes). -EIO: damaged. */
int blob_read_packed(struct store *st, const struct blobkey *k, const struct fprec *r, void *out);
/* The same into a buffer of its own (*out, malloc'd, r->size bytes). */
int blob_read_packed_alloc(struct store *st, const struct blobkey *k, const struct fprec *r, void **out);
/* The checked header of packed record r (pack_read_hdr at its place). */
int blob_rec_hdr(struct store *st, const struct fprec *r, struct pack_rec_hdr *h);
/* How packed record r is cut: its chunk count and 2^shift bytes a chunk. */
int blob_chunking(struct store *st, const struct fprec *r, uint32_t *nchunks, unsigned *shift);
/* Decode only the chunks covering [off, off+len). */
int blob_read_range(struct store *st, const struct blobkey *k, const struct fprec *r, uint64_t off, size_t len,
		    void *out);
/* Encode content fp (its bytes in mem, or in fd when mem is NULL) as a
 * page record with the store's codec settings; outside any transaction. */
int blob_encode(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out);
/* Give rec the identity k and append it (synced under sync_blobs). */
int blob_append(struct store *st, struct pack_rec *rec, const struct blobkey *k, struct pack_loc *loc);

/* The nursery (pack.h): where close() puts a new page when the store has
 * one (store_opts.nursery), as long as the nursery's packs hold less than
 * BLOB_NURSERY_MAX_BYTES; past that a seal writes the final record itself
 * (counted in st->nursery_bypassed), so the nursery stays bounded when
 * the background falls behind. The record lives until the delta step
 * writes the final one (ndelta.h), so close() spends as little on it as
 * it can: the page goes in raw while the nursery holds less than
 * BLOB_NURSERY_RAW_BYTES and the disk has BLOB_NURSERY_MAX_BYTES free,
 * and at BLOB_NURSERY_LEVEL past either. Level 1 with the dictionary
 * was more than half of close()'s CPU (about 90 us for a 31 KB page
 * here: 330-490 MB/s); raw, one writer was 18-50% faster on three Debian
 * doc sets (tests/bench/README.md, "What one writer waits for"). The
 * price is disk the nursery takes while the step catches up: up to the
 * raw bytes as they are, then level 1 up to the bound, so the bound is
 * four times the raw share (raw below 128 MiB with the bound at 256 MiB
 * reached the half where a close() helps the step, and one writer was
 * slower than with level 1). A nursery record's bytes are dead once its
 * final record is in (punched once durable), so the store's size at
 * rest is the same. */
#define BLOB_NURSERY_LEVEL 1
#define BLOB_NURSERY_RAW_BYTES (256ull << 20)
#define BLOB_NURSERY_MAX_BYTES (1024ull << 20)
/* The level of a page's final record when it is stored whole by the
 * background step (not by close(), which keeps PACK_DEFAULT_LEVEL): the
 * issue-15 nursery note has the measurements. store_opts.pack_level
 * overrides both. */
#define BLOB_FINAL_LEVEL 6
/* blob_encode at the final level. */
int blob_encode_final(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out);
/* The nursery's bound in bytes (store_opts.nursery_max_bytes, else
 * BLOB_NURSERY_MAX_BYTES). */
uint64_t blob_nursery_max(const struct store *st);
/* Should a page sealed now go to the nursery? */
bool blob_nursery_wanted(struct store *st);
/* Does the nursery hold half its bound or more? The delta step then no
 * longer rests (ndelta.h), and a close() does a batch of it before its
 * own seal (sigq_help_deltas), so that the nursery's records leave it as
 * fast as pages arrive instead of the bound being passed. */
bool blob_nursery_behind(struct store *st);
/* Encode content fp for the nursery (its level and the current
 * dictionary). */
int blob_encode_nursery(struct store *st, const struct fp *fp, const void *mem, int fd, struct pack_rec *out);
/* blob_append into the nursery. */
int blob_append_nursery(struct store *st, struct pack_rec *rec, const struct blobkey *k, struct pack_loc *loc);
/* Is packed record r in the nursery (waiting for its final record)? */
bool blob_in_nursery(struct store *st, const struct fprec *r);
/* A write of the content of a record marked bad: the record now points at
 * the fresh copy at loc (every inode on it reads the good bytes again); the
 * damaged bytes are dead. */
int blob_heal(struct wtx *w, const struct blobkey *k, const struct pack_loc *loc, uint32_t dict);
/* Mark k's record bad (a read found it damaged), in a write of its own. */
int blob_mark_bad(struct store *st, const struct blobkey *k);

/* What the packs take: files, their length and allocated bytes, the live
 * records' bytes, the dead bytes (length less live records, dictionaries
 * and headers: freed records, and records whose commit never came), and
 * the dictionaries. */
struct blob_pack_usage {
	uint64_t packs, length, allocated, live, live_records, dead, dicts, dict_bytes;
	/* of which in the nursery's packs (pack.h) */
	uint64_t nursery_packs, nursery_length, nursery_allocated, nursery_live, nursery_live_records;
	uint64_t kept, kept_bytes; /* bases kept for their deltas (in live) */
};
int blob_pack_usage(struct store *st, struct blob_pack_usage *u);

/* Format 1 to 2: move every blob file into the packs (checked against its
 * record first; a file that does not match stays, for fsck to report),
 * each batch appended and synced before the commit that points its records
 * at the packs; the files go after that commit. *moved: blobs moved,
 * *left: files that could not be (missing or damaged). */
int blob_convert_files(struct store *st, uint64_t *moved, uint64_t *left);

/* Decode pack record rec (read with pack_read_rec) in memory with the
 * store's dictionaries and bases, and check it: 0, or -EIO if damaged. */
int blob_rec_check(struct store *st, const struct pack_rec *rec);
/* The same, keeping the page's raw bytes (*out, malloc'd, hdr.size). */
int blob_rec_decode(struct store *st, const struct pack_rec *rec, void **out);

/* ---- the compactor (blob_compact.c) ---------------------------------------
 *
 * A record whose last reference went is dead bytes in its pack (its whole
 * blocks are punched out at once, its partial blocks and the pack file
 * stay). The compactor rewrites a pack whose live share (live records and
 * dictionaries over the pack's length) is below a threshold and that has
 * at least a minimum of allocated bytes beyond its live ones: its live
 * records are copied, verbatim or encoded again colder when that is
 * smaller (blob_cold.c: cfg.cold), and checked first (a damaged record is
 * not copied: it stays, is marked bad and counted), to the pack taking
 * appends; then the pack is removed. A page record encoded again moves
 * from its old dictionary's count to the new one's in the commit of step
 * 3. Crash-safe at every step:
 *  1. the pack stops taking appends (a rollover, inside a write
 *     transaction, so that every seal that appended to it has committed
 *     once that transaction has);
 *  2. a batch of live records is copied and synced (always, not only
 *     under sync_blobs: these are pages stored long ago);
 *  3. one transaction points each record (and dictionary row) that still
 *     names its old place at its copy (a record freed or healed meanwhile
 *     is left alone: its copy is dead bytes); 2 and 3 repeat;
 *  4. the pack is retired (no commit may name it any more: pack_retire),
 *     a transaction checks that nothing live is left in it, the commit is
 *     made durable, and the file is removed.
 * A crash before 3 leaves dead copies (compacted later); between 4's
 * commit and the removal an empty pack, which the next writable open
 * removes and fsck counts as a leftover. A reader that found a record
 * before 3 and reads it after 4 finds it moved and reads it there
 * (blob_pack.c); a read in progress keeps its pack's descriptor (pack.h).
 *
 * Its outcome, summed over the store's life, in the meta row
 *   "compact" -> packs compacted u64 | packs removed u64 | records moved u64 |
 *                bytes moved u64 | bytes given back u64 | damaged records
 *                left u64 | records encoded again u64 | bytes that saved
 *                u64 | of those records, whole pages made deltas by a
 *                window u64 (little-endian, 72 bytes; 64 before the
 *                window, 48 before records were encoded again: a reader
 *                takes the fields it knows from a longer row, and zeros for
 *                those a shorter row lacks; an older build that adds to
 *                the row writes its own fields only)
 * changed in the transactions that move records and remove packs.
 *
 * A cold pass (`pagededup compact --all`: cfg.every_pack with a cold
 * level) writes its copies to packs of its own, whose header carries the
 * cold mark (level, deltas, window, dictionary: pack.h), and at its end, in one
 * transaction, leaves a row for each:
 *   "cold" | pack id (u32 big-endian) -> created u64 | records u64 |
 *            bytes u64 | length u64 (little-endian, 32 bytes: the pack
 *            header's created seconds, its "pack" row's live totals and
 *            the pack file's length then)
 * (rows of packs no longer present go in the same transaction). A later
 * cold pass leaves a pack as it is when its mark is the pass's own (the
 * same level, deltas if it takes them, the same window, the same newest
 * dictionary) and
 * its live totals and its length still equal its row's: no page in it
 * died and nothing else was appended (an append whose pages died since
 * leaves the live totals as they were, not the length), so encoding it
 * again would write the same bytes.
 * Anything else (no row, a row of another size or of an older pack of
 * that id, other totals) and the pack is rewritten as before: the row is
 * a hint about cost only, which an older build ignores. */
#define BLOB_COMPACT_SHARE 0.5           /* rewrite a pack less than half live */
#define BLOB_COMPACT_MIN_DEAD (1ull << 20) /* ... with at least this to give back */
#define BLOB_COMPACT_PERIOD_MS 10000       /* how often the thread looks */
#define BLOB_COMPACT_BATCH 4096            /* records copied per commit */
#define BLOB_COMPACT_BATCH_BYTES (32u << 20) /* ... or bytes (a sync and a commit each) */

struct blob_compact_stats {
	uint64_t packs_compacted, packs_removed, records_moved, bytes_moved, bytes_freed, damaged;
	uint64_t records_cold, bytes_cold_saved; /* of those moved: encoded again, and the bytes that saved */
	uint64_t records_window; /* of those: whole pages stored as deltas on a page of the window (blob_cold.c) */
	/* Packs a cold pass left as they were: a cold pass as this one wrote
	 * them, every page in them still live (pack.h's cold mark). Not kept
	 * in the "compact" row. */
	uint64_t packs_cold_kept;
};
/* The totals of the "compact" row (zero when the store has none). */
int blob_compact_stats(struct store *st, struct blob_compact_stats *out);

/* ---- records encoded again when copied (blob_cold.c) -------------------
 *
 * The compactor may encode a record it copies again, colder: decoded
 * whole (and so checked), encoded at a higher zstd level, a whole page
 * with the store's newest dictionary (a page stored before the first
 * dictionary gets one), a delta against the same base; the new record is
 * kept only when it is smaller. Identity, size and XXH3-128 are the
 * page's and do not change. A base encoded again still decodes to the
 * same bytes, so the deltas on it stay valid. Levels (issue-15 cold
 * note, measured on make bench's corpus and two Debian doc sets):
 * BLOB_COLD_LEVEL for `pagededup compact --all` (the operator's "make it
 * small now": whole pages and deltas), BLOB_COMPACT_COLD_LEVEL for the
 * background compactor, which encodes again only the whole pages it
 * copies anyway: per CPU second, deltas give a third of what whole pages
 * give (at level 9 on the corpus and its recrawl: whole pages 1.87 MB
 * smaller for 6.7 s of CPU, deltas 0.62 MB more for 6.5 s more), and the
 * level 9 encode (84 MB of raw pages a CPU second with the dictionary,
 * against 3 at level 19) bounds the work of one pack to seconds.
 * store_opts.compact_level (-o compact_level) sets the daemon's. */
#define BLOB_COLD_LEVEL 19
#define BLOB_COMPACT_COLD_LEVEL 9

/* The window of a cold pass (`compact --all`), as git's pack-objects
 * tries each object as a delta on the objects just before it: a whole
 * page is also tried as a delta on each of the BLOB_COLD_WINDOW pages
 * the pass copied just before it (in pack order, which is the order the
 * pages were stored in: a crawl's pages of one site and one directory
 * sit together, and share their templates), and stored as the smallest of
 * its whole record and those deltas. The candidates are ranked by a delta
 * at BLOB_COLD_TRIAL_LEVEL (fast); only the best is encoded at the cold
 * level, and only when even the trial beat the whole page at that level.
 * A page takes part (as candidate or base) only when it is one chunk
 * (PACK_DEFAULT_CHUNK_SHIFT), so the window holds at most
 * BLOB_COLD_WINDOW chunks of raw bytes; a base must be less than
 * BLOB_DELTA_DEPTH deep, and a page that deltas hang on stays whole (the
 * rules of blob_delta_move, checked again in the commit that points the
 * page at its delta: the delta's link row is written there).
 * Measured (tests/bench/README.md, "The window of compact --all"): on
 * the corpus's store, the packs 0.889 of a pass without a window
 * (25.07 MB against 28.21), for 1.54 times its CPU; on three Debian
 * documentation sets 0.96-0.99. `bench_pack --window 8 --window-gate 1`
 * (the corpus's pages with no simhash neighbour, path order, level 6):
 * 0.828 of each page alone with the dictionary, a read decoding 1.75
 * deltas on average (0.821 and 2.49 without the depth gate). */
#define BLOB_COLD_WINDOW 8
#define BLOB_COLD_WINDOW_MAX 64
#define BLOB_COLD_TRIAL_LEVEL 3

struct blob_cold_cfg {
	int level;   /* zstd level; <= 0: records are copied as they are */
	bool deltas; /* deltas too (else only whole pages) */
	unsigned window; /* whole pages tried as deltas on this many before them (<= BLOB_COLD_WINDOW_MAX) */
};
/* The pages a cold pass copied last, their raw bytes kept for the window. */
struct blob_cold_window;
struct blob_cold_window *blob_cold_window_new(unsigned slots);
void blob_cold_window_free(struct blob_cold_window *win);
/* The same window on the write path (the delta step, ndelta.h): pages
 * are tried as deltas on pages the step gave their records just before,
 * as the cold pass tries them on the pages it copied before; of those,
 * on the ones whose markup is closest to theirs (text/markup.h: mark),
 * so that pages of several sites written in turn, as a crawl of many
 * hosts writes them, each meet their own site's.
 * blob_window_pick: a window of copies of the n slots of win whose mark
 * is nearest mark (of equals, the newest), leaving out page k and the
 * pages already BLOB_DELTA_DEPTH deep: what a caller that shares win
 * tries outside its lock (NULL when there is none to try, or without
 * memory). blob_window_delta: page k (raw, size bytes, its XXH3-128)
 * encoded at level as a delta on each slot of win (may be NULL), and the
 * smallest kept when it is worth it against the page whole (whole bytes
 * at the level the page would be stored at), by the same depth rule as
 * the cold pass's: 1 and *out (pack_rec_free) with its base's depth, 0
 * when none is, -ENOMEM. No transaction: the commit that points the page
 * at the delta checks the delta rules (blob_delta_move).
 * blob_window_keep: page k joins the window at the depth its record will
 * have, with its mark (raw, malloc'd, taken over: freed when the page
 * does not take part, is there already, or win is NULL).
 * blob_window_takes: whether a page of size bytes takes part (one
 * chunk). */
struct blob_cold_window *blob_window_pick(const struct blob_cold_window *win, const struct blobkey *k,
					  uint64_t mark, unsigned n);
int blob_window_delta(struct blob_cold_window *win, const struct blobkey *k, const uint8_t xxh128[16],
		      const void *raw, uint64_t size, int level, size_t whole, struct pack_rec *out,
		      unsigned *base_depth);
void blob_window_keep(struct blob_cold_window *win, const struct blobkey *k, void *raw, uint64_t size,
		      unsigned depth, uint64_t mark);
bool blob_window_takes(uint64_t size);
/* Record in (read by pack_read_rec, a page) encoded again by c: 1 and
 * *out (pack_rec_free) when that is smaller, 0 when the old bytes stay
 * (not smaller; in was decoded whole, and so checked, either way),
 * -EOPNOTSUPP when c does not take such a record (nothing decoded), -EIO
 * when in is damaged or its base cannot be read, -ENOMEM. With win (may
 * be NULL) and c->window, a whole page may come out as a delta on a page
 * of the window (out's header names its base: its link row is the
 * committer's to write, blob_delta_link_cold), and the page joins the
 * window. Outside any transaction. */
int blob_cold_reencode(struct store *st, const struct pack_rec *in, const struct blob_cold_cfg *c,
		       struct blob_cold_window *win, struct pack_rec *out);
/* A cold pass (blob_cold.c; the "cold" rows are described with the
 * compactor above): the mark its packs carry (c's level and deltas, the
 * store's newest dictionary); its rows written at its end for the packs
 * of that mark with ids over `after`, those of packs gone removed; and
 * whether pack id (live: its "pack" row's totals) is one such a pass
 * wrote and left unchanged, so that the pass of mark would write the same
 * bytes again. */
struct pack_cold blob_cold_mark(struct store *st, const struct blob_cold_cfg *c);
int blob_cold_rows_write(struct store *st, uint32_t after, const struct pack_cold *mark);
bool blob_cold_pack_unchanged(struct store *st, uint32_t id, const struct blob_pack_live *live,
			      const struct pack_cold *mark);

struct blob_compact_cfg {
	double share;       /* compact packs below this live share */
	uint64_t min_dead;  /* with at least this many bytes to give back */
	/* Encode the page records copied again (blob_cold.c); level 0:
	 * copied as they are. */
	struct blob_cold_cfg cold;
	/* Every pack with a live record qualifies, dead bytes or not
	 * (`pagededup compact --all`: every record encoded cold). With a
	 * cold level, that is a cold pass: its copies go to packs of their
	 * own that carry the cold mark (pack.h), and a pack that a cold pass
	 * at the same level, as many deltas and the same newest dictionary
	 * wrote, every page in it still live, is left as it is (encoding its
	 * records again would give the same bytes). */
	bool every_pack;
	/* The order a cold pass with a window copies the pages of each pack
	 * in (NULL: the pack's own, the order they were stored in): page k's
	 * key, NUL-terminated in buf, keys compared as strings. The tool
	 * gives a page's path (query_blob_path): the pages of a directory
	 * together, in name order, as a crawl's URL paths hold a site's
	 * templates together (a cp -r stores a directory in its readdir
	 * order: on the corpus, in path order the window's deltas take 0.765
	 * of the pages alone against 0.816 in the order cp -r stored them,
	 * level 6, the issue-15 window note). A key that cannot be had sorts
	 * first. */
	int (*page_key)(void *ctx, const struct blobkey *k, char *buf, size_t size);
	void *key_ctx;
	/* Tests: called with ctx after each batch's copies are synced, before
	 * the commit that points the pages at them, where a writer may free
	 * or change a page meanwhile. NULL in every other caller. */
	void (*before_commit)(void *ctx);
	/* Asked between batches; true stops the pass (-ECANCELED). */
	bool (*stop)(void *ctx);
	void *ctx;
	bool debug_stops;   /* honour PD_COMPACT_STOP (blob_compact.c) */
	/* Packs a pass left as they were (a damaged record in them, or one
	 * to encode again), with their live totals then: passed over while
	 * those do not change (the thread's passes; NULL: none kept). */
	struct blob_compact_memo *memo;
	/* A cold pass at rest (the daemon's idle pass, below): packs of a
	 * sixteenth of a full pack or more that a cold pass marked at this
	 * level or a colder one are left, whatever their dictionary (their
	 * dead bytes are the plain pass's to give back), and the pass does
	 * nothing unless the packs not marked hold at least min_cold_bytes
	 * live bytes. */
	bool skip_marked;
	uint64_t min_cold_bytes;
};
struct blob_compact_memo {
	struct { uint32_t id; uint64_t bytes, records; } *v;
	size_t n, cap;
};
/* The store's settings (store_opts) with the defaults above. */
void blob_compact_cfg_of(struct store *st, struct blob_compact_cfg *c);
/* One pass: every pack that qualifies is compacted (and every pack other
 * than the current one with nothing live in it removed); *done (may be
 * NULL) gets what this pass did. Errors: -ENOSPC (the copies did not fit:
 * nothing is lost, the pack stays), -EROFS, -ECANCELED, -errno. */
int blob_compact_run(struct store *st, const struct blob_compact_cfg *c, struct blob_compact_stats *done);
/* A pass that copies nothing: the packs with nothing live (an emptied
 * nursery pack, one a stopped compaction left) removed now. wait: after
 * the pass running, if any; else none when one runs (it removes them).
 * 0, or the pass's error. */
int blob_compact_empty_packs(struct store *st, bool wait);
/* Compact pack id now, whatever its share; what it did is added to *done. */
int blob_compact_pack(struct store *st, uint32_t id, const struct blob_compact_cfg *c,
		      struct blob_compact_stats *done);
void blob_compact_memo_free(struct blob_compact_memo *m);
/* The thread that runs blob_compact_run every compact_period_ms
 * (blob_compactor.c; blob_part: started by a writable open unless compact_share < 0,
 * stopped at close).
 *
 * The idle pass. A crawl's pages get their final records from the delta
 * step at its level, with the dictionary of the moment and a window of the
 * last pages it stored; `pagededup compact --all` does better (a window of
 * 8 pages, every record encoded again), but only on an unmounted store. A
 * mount whose store has committed nothing for store_opts.idle_compact_s
 * seconds (writers, signer, delta step, trainer all at rest: LMDB's last
 * transaction id still) runs a cold pass of its own: every main pack but
 * those a cold pass already marked at compact_level or colder (of a
 * sixteenth of pack_max_bytes or more: a smaller one, the last rest's, is
 * taken again with the new pages, so that a slow crawl's rests leave one
 * small pack, not one each), each page
 * record encoded again at compact_level (BLOB_COMPACT_COLD_LEVEL), deltas
 * too, whole pages tried on a window of BLOB_COLD_WINDOW, each pack's
 * pages in the order of their paths (st->page_key, the archive's), when
 * the packs not marked hold at least BLOB_IDLE_MIN_BYTES (a page now and
 * then is not worth a pass). It stops at the next record once a page is
 * written or removed (the seals or the pages counted by the commits
 * change), and runs again after the next rest. Its packs are written
 * while writers may come back, so a record the delta step appends before
 * the pass stops lands in a marked pack: such a record keeps the bytes it
 * had (a cost, never a fault: every record says what it is). The
 * dictionaries no record needs stay (blob_dict_drop_unused is the tool's:
 * a page encoded outside a transaction may still need one). Measured:
 * tests/bench/README.md, "The idle pass". */
#define BLOB_IDLE_MIN_BYTES (1u << 20)
int blob_compact_start(struct store *st);
void blob_compact_stop(struct store *st);

/* Where the delta rules meet the compactor: a record that must be encoded
 * again rather than copied as it is. A delta's base outlives it (a base
 * whose last reference went is kept for its deltas, blob_delta_release,
 * and its deltas are stored whole again by the delta step, ndelta.h), so
 * a delta is copied as it is, and a kept base is moved like any record
 * (its "dkep" row follows it). Only a delta whose base has neither a
 * fingerprint record nor a kept row wants re-encoding; it cannot be
 * decoded, so blob_compact_reencode returns -EOPNOTSUPP and it stays
 * where it is, counted as left (fsck names it). */
bool blob_compact_wants_reencode(struct store *st, const struct blobkey *k, const struct pack_rec_hdr *h);
int blob_compact_reencode(struct store *st, const struct blobkey *k, const struct pack_rec *in,
			  struct pack_rec *out);
/* ---- deltas (blob_delta.c) ---------------------------------------------
 *
 * A page record may be a delta (PACK_ENC_DELTA: zstd with the raw bytes of
 * another page, its base, as reference prefix). Which pages hang on a base
 * is kept in the meta table, so that a base outlives the deltas on it:
 *   "dlnk" | base blobkey [20] | delta blobkey [20] -> (empty)
 *       one row per delta record, written and removed with it;
 *   "dkep" | blobkey [20] -> pack u32 | offset u64 | length u64 | size u64 |
 *       xxh128 [16]   (48 bytes, little-endian)
 *       a base whose last reference went while deltas still hang on it:
 *       its fingerprint record is gone (no near rows, twins, counts), its
 *       pack record stays live in the pack's totals (not in its
 *       dictionary's: dictionaries are never removed) until its last
 *       delta is re-encoded or freed; then the row goes and the record's
 *       blocks are punched.
 * A record is made a delta only while nothing hangs on it, and only on a
 * base at most BLOB_DELTA_DEPTH - 1 deep (both checked in the transaction
 * that points the record at its delta), so a base never becomes deeper
 * than when its deltas were taken and no read decodes more than
 * BLOB_DELTA_DEPTH + 1 records. */

/* Is packed record r a delta? 1 and its base in *base, 0 if not, -EIO if
 * its header cannot be read. */
int blob_delta_base(struct store *st, const struct fprec *r, struct blobkey *base);
/* How many deltas deep record r is (0: whole), following the bases'
 * records (fingerprints, then kept rows) in txn. -EIO: a header or base
 * missing, or deeper than BLOB_DELTA_DEPTH. */
int blob_delta_depth(MDB_txn *txn, struct store *st, const struct fprec *r, unsigned *depth);
/* The kept base k's record (FPREC_PACKED, place, size, XXH3-128):
 * -ENOENT when k is not kept. */
int blob_delta_kept_get(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *out);
/* The record base k names for the deltas on it: its fingerprint record,
 * else its kept row; -ENOENT when it has neither. */
int blob_delta_base_rec(MDB_txn *txn, struct store *st, const struct blobkey *k, struct fprec *r);
/* Kept base k's record now lies at loc (the compactor moved it): -ENOENT
 * when k is not kept. */
int blob_delta_kept_set_loc(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct pack_loc *loc);
/* Every kept base; fn returning non-zero stops the walk with that value
 * (positive: 0). */
int blob_delta_kept_each(MDB_txn *txn, struct store *st,
			 int (*fn)(void *ctx, const struct blobkey *k, const struct fprec *r), void *ctx);
/* Up to max deltas hanging on base (into v, *n of them; v NULL: counted
 * only). */
int blob_delta_dependents(MDB_txn *txn, struct store *st, const struct blobkey *base, struct blobkey *v,
			  size_t max, size_t *n);
/* Every delta hanging on base: fn(ctx, base, dep), which may read any
 * table and write none in meta; non-zero stops the walk with that value
 * (positive: 0). */
int blob_delta_dependents_each(MDB_txn *txn, struct store *st, const struct blobkey *base,
			       int (*fn)(void *ctx, const struct blobkey *base, const struct blobkey *dep), void *ctx);
/* Is there a link row base -> dep? */
int blob_delta_linked(MDB_txn *txn, struct store *st, const struct blobkey *base, const struct blobkey *dep);
/* What the store holds as deltas: the delta records (one link row
 * each), the bytes of those records, and of them the chunked deltas
 * (pages over a chunk, pack.h) and their bytes. */
struct blob_delta_usage {
	uint64_t deltas, delta_bytes;
	uint64_t chunked, chunked_bytes;
};
/* A walk of the link rows (there is no counter of them): a fingerprint
 * (or kept) record looked up per delta, and the record header read of a
 * delta over PACK_DEFAULT_CHUNK_SHIFT's chunk
 * (every encoder of deltas chunks at that shift: ndelta.c, blob_cold.c),
 * to tell a chunked one. A link whose record cannot be found or read is
 * counted as a delta of 0 bytes (fsck names it). -errno of LMDB. */
int blob_delta_usage(struct store *st, struct blob_delta_usage *out);
/* The walk takes this many link rows a snapshot, then goes on after the
 * last one under a new snapshot: one snapshot over millions of rows (the
 * stats of a busy mount) would keep every LMDB page the writers free
 * meanwhile from reuse. The totals are a sum over rows that may move
 * between snapshots, as they may between two stats. */
#define BLOB_DELTA_USAGE_BATCH 4096
int blob_delta_usage_batched(struct store *st, size_t batch, struct blob_delta_usage *out);
/* Every link row (fsck). */
int blob_delta_link_each(MDB_txn *txn, struct store *st,
			 int (*fn)(void *ctx, const struct blobkey *base, const struct blobkey *dep), void *ctx);
/* Point blob k, whose record is still at `was` (else nothing is done and
 * 1 is returned), at the record at loc (appended and synced as a seal's):
 * a delta on base (base NULL: a record that needs no other page). The old
 * record's bytes are dead (punched after the commit). A delta is refused
 * (1) when k has deltas of its own, when base has no fingerprint record,
 * is bad, or is BLOB_DELTA_DEPTH deep already. */
int blob_delta_move(struct wtx *w, const struct blobkey *k, const struct pack_loc *was, const struct pack_loc *loc,
		    uint32_t dict, const struct blobkey *base);
/* The compactor points k at a delta on base that a cold pass's window
 * made of it (blob_cold.c): the link row base -> k, when the rules of
 * blob_delta_move allow it (0: the listeners told, blob_listener's
 * `linked`); 1 when they refuse (the copy is not to be used: k stays
 * where it is). */
int blob_delta_link_cold(struct wtx *w, const struct blobkey *k, const struct blobkey *base);
/* The last reference to packed blob k (record r, its fingerprint row
 * deleted) went: its record becomes dead bytes, or a kept base when
 * deltas hang on it. */
int blob_delta_release(struct wtx *w, const struct blobkey *k, const struct fprec *r);
/* fsck's repair: packed blob k (record r), which no inode refers to any
 * more, is kept for the deltas that hang on it, as blob_delta_release
 * keeps a base whose last reference went (1; the caller drops its
 * fingerprint record), or it has none (0: it can go). The pack totals and
 * dictionary counts are fsck's to recount. */
int blob_delta_keep_unreferenced(MDB_txn *txn, struct store *st, const struct blobkey *k, const struct fprec *r);
/* Base k was healed (blob_heal): its deltas marked bad, which a read
 * failed on through it, are readable again (a delta itself damaged is
 * marked again by its next read). */
int blob_delta_healed(struct wtx *w, const struct blobkey *k);
/* Record r of k is no longer k's (freed, healed, moved): if it was a
 * delta, its link goes, and a kept base left with no delta is freed. */
int blob_delta_forget(struct wtx *w, const struct blobkey *k, const struct fprec *r);

/* ---- dictionaries (blob_dict.c) ------------------------------------------
 *
 * zstd dictionaries trained from the store's own pages. The training
 * sample is drawn uniformly (a reservoir of BLOB_DICT_SAMPLES pages,
 * Vitter's algorithm R) from the pages sealed since the last training,
 * seen at close() (before the nursery's record). (A ring of the most
 * recent pages, as before, trained on whatever one site or package the
 * crawl was in at that moment: on make bench's corpus each page alone
 * then took 46.5 MB with the store's dictionary against 33.6 MB with one
 * trained on 512 pages spread over the corpus; the issue-15 packsize
 * note.)
 *
 * The sample is kept by reference: the reservoir holds each page's
 * identity (MD5, XXH3-128, size: 40 bytes), not its bytes, and the
 * trainer reads the pages back from the store when it trains, through
 * the decode of any record form (a nursery record, a final one, a
 * delta), in a random order of the reservoir, each cut to
 * BLOB_DICT_SAMPLE_MAX bytes, until BLOB_DICT_SAMPLE_BYTES are read; a
 * page freed (or found damaged) since it was sampled is skipped. So the
 * sample can be many times the dictionary, which a large dictionary
 * needs (a 512 KiB dictionary trained on 4.6 MB made the corpus's pages
 * 24% larger than a 110 KiB one; on 20-32 MB, 7-9% smaller: the
 * issue-15 dictsize note), while the daemon holds 160 KiB of identities
 * between trainings. The sample's buffer (at most BLOB_DICT_SAMPLE_BYTES)
 * and zstd's training state exist only while the trainer runs, and are
 * given back to the system after it (malloc_trim): on make bench's
 * corpus the daemon's RssAnon rose by 30-36 MB for the 2.5-4 s of each
 * training with a 16 MiB sample (zstd's trainer the rest) and came back;
 * the sample is 8 MiB now (BLOB_DICT_SAMPLE_BYTES, below).
 *
 * The dictionary's size follows the sample's bytes: sample /
 * BLOB_DICT_RATIO, at least BLOB_DICT_MIN_BYTES and at most
 * BLOB_DICT_MAX_BYTES (blob_dict_size_for); a dictionary zstd's trainer
 * makes under half the size asked is trained again at
 * BLOB_DICT_MIN_BYTES (once seen: 76 KB for 512 KiB asked, which made
 * python-scipy-doc's pages twice larger). Measured at level 6, each page
 * alone with a dictionary trained on pages spread over the input, the
 * dictionary's bytes counted: 256 KiB takes 5-6% off the corpus's pages
 * against 110 KiB and is within 1% of the best size on four Debian doc
 * sets; 512 KiB gains 3% more on the corpus only, is worse on two of
 * the four, and its compression forms take twice the memory (below);
 * 256 KiB needs about 8 MB of sample. The cap is 110 KiB all the same:
 * a 256 KiB dictionary compresses 14-20% slower at level 6 (its
 * compression form is 3.4 MB against 0.9, and each page is matched
 * against more of it), which made the delta step 15% slower through the
 * store (2,783 -> 2,377 pages/s of one core on the corpus's crawl) for
 * 1.6% off the corpus's store after `compact --all` (0.6705 -> 0.6596 of
 * its gzip sum) and 7% off small pages; while the write path's CPU is
 * what the ingest goals lack, it does not pay (the issue-15 dictsize
 * note). The rule stands, so a larger cap is one constant; with the cap
 * at 110 KiB an 8 MiB sample is as good as a larger one (a 2,223-page
 * sample gave the corpus 33.56 MB against 33.29 for 513 pages).
 * The first dictionary is trained once BLOB_DICT_FIRST pages were seen,
 * so that the store's first pages do not go long without one (they are
 * encoded without a dictionary until then), on a sample of those pages
 * (on the corpus 6.8 MB: 212 KB); the next ones, on larger samples, are
 * up to BLOB_DICT_MAX_BYTES. They are
 * trained when the pages stored since the last training reach those
 * before it while the store has fewer than BLOB_DICT_YOUNG pages (a
 * first dictionary trained on 512 pages and used for the next 1,500 made
 * them 28% larger than the later one did), 3 times those before it after
 * that (geometric: a bounded number of dictionaries) or when the pages
 * drift (new pages compress 20% worse than those right after the
 * training). A dictionary is a pack record of its own (a record of any
 * size: pack.h), appended and synced, then named by its meta row, before
 * any page record that needs it is encoded:
 *   "dict" | id u32 BE -> pack u32 | offset u64 | length u64 | records u64
 * (little-endian). records counts the live page records that need it
 * (changed with them). A dictionary lives at least as long as a record
 * needs it: one no record needs any more is kept too while the store is
 * mounted (a page encoded with it outside a transaction may still be on
 * its way in; the geometric rule keeps them few), and goes at
 * `pagededup compact --all` (blob_dict_drop_unused). Training runs on a
 * thread of its own, off close().
 *
 * Memory: every dictionary a decode or an encode needed since the open
 * stays loaded (its bytes and zstd's decoding form: 0.25 MB for 110 KiB),
 * a few per store by the geometric rule; only the current one keeps
 * zstd's compression forms, one per level it encodes at (for 110 KiB:
 * 0.16 MB at level 1, 0.5 at 3, 0.9 at 6 and 9, 1.7 at 19; for 256 KiB
 * 0.3, 1.1, 3.4, 6.6 and 8.7: the issue-15 dictsize note). A dictionary a newer one replaced frees them
 * once the last encode holding it is done (blob_dict_hold). */
#define BLOB_DICT_FIRST 512               /* pages before the first training */
#define BLOB_DICT_SAMPLES 4096            /* pages the reservoir holds (their identities) */
#define BLOB_DICT_SAMPLE_MAX (64 * 1024)  /* bytes of a page in the sample */
#define BLOB_DICT_SAMPLE_BYTES (8u << 20) /* bytes of the sample read back, at most */
#define BLOB_DICT_RATIO 32                /* sample bytes per dictionary byte */
#define BLOB_DICT_MIN_BYTES (110 * 1024)  /* the smallest dictionary trained */
#define BLOB_DICT_MAX_BYTES (110 * 1024)  /* the largest (see above) */
#define BLOB_DICT_YOUNG (16 * BLOB_DICT_FIRST) /* pages: retrain as the store doubles up to this */

/* The training sample's reservoir (Vitter's algorithm R): after any
 * number of offers, each page offered since the last clear is among the
 * kept with the same chance, cap / seen. keys is allocated at the first
 * offer (cap of them); rng: its random state, any value. */
struct blob_dict_reservoir {
	struct fp *keys;
	unsigned cap, filled;
	uint64_t seen, rng;
};
/* Offer page fp: 1 kept (in a free slot, or in place of one drawn at
 * random), 0 not kept, -ENOMEM. */
int blob_dict_reservoir_offer(struct blob_dict_reservoir *r, const struct fp *fp);
/* Empty it (its keys stay allocated). */
void blob_dict_reservoir_clear(struct blob_dict_reservoir *r);

/* The size of the dictionary trained on sample_bytes (the rule above). */
size_t blob_dict_size_for(size_t sample_bytes);

/* A training sample read back from the store: the first bytes of each
 * page read (at most per_page), laid end to end. */
struct blob_dict_sample {
	char *bytes;
	size_t *sizes;     /* of each page's bytes */
	unsigned *from;    /* which of the pages asked for each is */
	unsigned n;        /* pages read */
	unsigned skipped;  /* pages no blob has any more, or damaged */
	size_t total;      /* bytes */
};
/* Read the pages of content pages[0..n) back (any record form), in a
 * random order drawn from seed, until budget bytes: 0 and *out
 * (blob_dict_sample_free), -ENOMEM, -ECANCELED when stop (may be NULL)
 * said so between two pages. Outside any transaction. */
int blob_dict_sample_read(struct store *st, const struct fp *pages, unsigned n, size_t per_page, size_t budget,
			  uint64_t seed, bool (*stop)(void *ctx), void *ctx, struct blob_dict_sample *out);
void blob_dict_sample_free(struct blob_dict_sample *s);

/* What the dictionaries' part did since the open. */
struct blob_dict_info {
	uint64_t reservoir, seen;   /* pages in the reservoir now, offered to it since the last training */
	uint64_t trained, failed;   /* trainings */
	uint64_t short_retrained;   /* of those, trained again at BLOB_DICT_MIN_BYTES (far shorter than asked) */
	double cpu_seconds;         /* the trainer's, in all */
	uint32_t last_id;           /* the last dictionary trained */
	uint64_t last_read, last_skipped, last_sample_bytes, last_dict_bytes; /* its sample and size */
	uint64_t loaded, loaded_bytes; /* dictionaries in memory now, and their bytes with zstd's forms */
};
void blob_dict_info(struct store *st, struct blob_dict_info *out);

/* Dictionary id, loaded once and kept for the store's life; NULL if there
 * is no such dictionary or it cannot be read. */
const struct pack_dict *blob_dict_get(struct store *st, uint32_t id);
/* The dictionary new records are encoded with (NULL: none yet). */
const struct pack_dict *blob_dict_current(struct store *st);
/* The same, held for an encode until blob_dict_unhold: a dictionary a
 * newer one replaced keeps its compression forms (several MiB: blob.h's
 * memory note) while an encode holds it, and frees them after. */
const struct pack_dict *blob_dict_hold(struct store *st);
void blob_dict_unhold(struct store *st, const struct pack_dict *dict);
/* A page of content fp was sealed and encoded (enc_len bytes at the
 * store's level, or 0 when encoded at another, the nursery's): it may
 * join the training sample (its identity), and may start a training. */
void blob_dict_observe(struct store *st, const struct fp *fp, uint64_t enc_len);
/* A page sampled before (blob_dict_observe) got its final record, enc_len
 * bytes for len: it counts in the measure of drift only. */
void blob_dict_drift(struct store *st, uint64_t len, uint64_t enc_len);
/* One live record more (sign > 0) or fewer that needs dictionary id. */
int blob_dict_account(struct wtx *w, uint32_t id, int sign);
/* The meta row of dictionary id (its record's place and live records). */
int blob_dict_row(MDB_txn *txn, struct store *st, uint32_t id, struct pack_loc *loc, uint64_t *records);
/* Dictionary id's record is now at loc (the compactor moved it). */
int blob_dict_set_loc(struct wtx *w, uint32_t id, const struct pack_loc *loc);
/* Every dictionary no record needs any more (its row counts none; no
 * base kept for its deltas needs it), other than the newest, goes: its
 * row is deleted and its record's blocks punched after the commit (they
 * are dead bytes, which the compactor gives back whole). Once the
 * compactor encoded every record again with the newest dictionary, the
 * older ones are such. Only where no page is being encoded outside a
 * transaction, since such a page may still be on its way in with an
 * older dictionary: an unmounted store (`pagededup compact --all`), never
 * a mounted one. *dropped, *bytes: the dictionaries and their records'
 * bytes. */
int blob_dict_drop_unused(struct store *st, uint64_t *dropped, uint64_t *bytes);
/* Wait for a training in progress (tests). */
void blob_dict_settle(struct store *st);
/* No more trainings; wait for one in progress (blob_part's stop). */
void blob_dict_stop(struct store *st);
/* Stop, and free the dictionaries (blob_part's release; fsck's store). */
void blob_dict_release(struct store *st);
/* Check an open blob against its record (size and XXH3-128): -EIO if the
 * bytes on disk are not the bytes stored. */
int blob_verify(int fd, const struct fprec *r);
/* Make the objects/ subdirectory of k. */
int blob_mkdirs(struct store *st, const struct blobkey *k);

#endif
