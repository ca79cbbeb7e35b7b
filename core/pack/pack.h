/* pack.h - pack files: page bytes in large append-only files of
 * self-describing, checksummed, compressed records.
 *
 * A store keeps the bytes of its distinct pages in STORE/packs/, a few large
 * files instead of one file per page (10^9 pages would otherwise be 10^9
 * files, each taking at least a 4 KiB block). LMDB maps a blob to the
 * place of its record (struct pack_loc); the record itself says what it
 * holds, so that the fingerprint table can be rebuilt from the packs alone
 * (fsck --repair) and a damaged record is recognised as damaged, never
 * returned as other bytes.
 *
 * This module knows files, records and codecs only (it includes nothing
 * above core/base): base < pack < store < blob.
 *
 * ---- On-disk format, version 2 (version 1 is read) ------------------------
 *
 * Files: STORE/packs/pack-NNNNNNNN (the pack id, 8 decimal digits, from 1).
 * Every integer is little-endian.
 *
 * Pack header (PACK_HDR_BYTES = 64, at offset 0):
 *    0  magic "PDPACK\r\n"                 8 bytes
 *    8  version u32                        PACK_VERSION (2; 1 in a pack
 *                                          written before layout 2
 *                                          records existed)
 *   12  header bytes u32                   64
 *   16  pack id u32                        the N of the file name
 *   20  flags u32                          bit 0 PACK_FLAG_NURSERY: a
 *                                          nursery pack (below); other
 *                                          bits 0. Written as 0 before
 *                                          the nursery existed, and an
 *                                          older reader that ignores it
 *                                          sees an ordinary pack
 *   24  created u64                        seconds since the epoch
 *   32  cold level u8                      0, or the cold mark (below):
 *   33  cold flags u8                      the zstd level, bit 0
 *   34  cold window u8                     PACK_COLD_DELTAS, the window
 *   35  reserved u8                        (0 in a mark written before
 *   36  cold dict u32                      windows) and the dictionary id
 *                                          of a cold pass
 *   40  reserved [16]                      0
 *   56  check u64                          XXH3-64 of bytes 0..55
 *
 * The cold mark (bytes 32..39, written since the cold mark existed; a
 * pack without one has zeros there). A main pack whose header carries a
 * cold level holds only records a cold pass of the compactor (`pagededup
 * compact --all`, blob_compact.c) wrote into it: every page record in it
 * was decoded and encoded again at that level, deltas too when
 * PACK_COLD_DELTAS is set, whole pages with dictionary `cold dict` (0:
 * the store had none), and kept in the smaller of the two encodings; with
 * a `cold window` W > 0, a whole page was also tried as a delta on each
 * of the W pages the pass copied before it (blob_cold.c), and kept as the
 * smallest of those. Such
 * a pack takes no other appends (a reopened set does not continue in it).
 * So a later cold pass at the same level, as many deltas, the same window and
 * the same newest dictionary, finding all of its page records still live, would write the
 * same bytes again: it leaves the pack as it is. The mark is a hint about
 * cost, never about content: each record still says what it is. An older
 * reader ignores bytes 32..55 (it checks only the XXH3-64 over them), so
 * the mark changes neither PACK_VERSION nor the store's format; an older
 * build that appends to the last such pack (it would continue in it after
 * a reopen) leaves records that a later cold pass takes as cold: they stay
 * as they were written, which costs bytes, never correctness.
 *
 * Records follow, each at an offset that is a multiple of 8 (zero padding
 * in between), appended and never rewritten. A record is a header, then
 * its payload. The header has one of two layouts, told apart by its magic,
 * so that a record stays what it is wherever it is copied (the compactor
 * copies records between packs, blob_compact.c): a version 2 pack holds
 * records of either layout; a version 1 pack only layout 1.
 *
 * Record header, layout 2 (written since pack version 2; 45 to 100
 * bytes: PACK_REC_HDR_MIN .. PACK_REC_HDR_MAX): only the fields a record
 * has, the numbers as varints (core/base/varint.h, LEB128):
 *    0  magic u32                          PACK_REC_MAGIC2 ("PDR2")
 *    4  kind u8                            as in layout 1
 *    5  encoding u8                        as in layout 1
 *    6  flags u8                           bit 0 PACK_RF_VARIANT, bit 1
 *                                          PACK_RF_DICT, bit 2 PACK_RF_BASE,
 *                                          bit 3 PACK_RF_CHUNKS: which of the
 *                                          optional fields below follow;
 *                                          other bits 0
 *    7  md5 [16]                           as in layout 1
 *   23  xxh128 [16]                        as in layout 1
 *   39  raw size varint
 *       payload bytes varint
 *       [variant varint]                   PACK_RF_VARIANT: the variant (or
 *                                          dictionary id) is not 0
 *       [dict varint]                      PACK_RF_DICT: encoding 2 or 4
 *       [chunk shift u8, nchunks varint]   PACK_RF_CHUNKS: nchunks > 1
 *       [base md5 [16], base variant varint]  PACK_RF_BASE: encoding 3 or 4
 *       check u32                          the low 32 bits of the XXH3-64
 *                                          of the header bytes before it
 * A field left out is 0 (nchunks 1). The flags must be exactly what the
 * encoding, variant and nchunks imply, and each varint in its shortest
 * form, so a header has one encoding: a reader refuses any other (-EIO).
 * Why: the 96 bytes of layout 1 were a third of a typical delta record
 * (about 200 bytes of payload) and most of a small page's; layout 2 takes
 * 45-50 bytes for a whole page, 62-66 for a delta.
 *
 * Record header, layout 1 (PACK_REC_HDR = 96 bytes; written by pack
 * version 1, read everywhere, still written on request: pack_rec_set_layout):
 *    0  magic u32                          PACK_REC_MAGIC ("PDR1")
 *    4  kind u8                            1 page, 2 dictionary
 *    5  encoding u8                        0 raw, 1 zstd, 2 zstd with the
 *                                          dictionary `dict`, 3 zstd with the
 *                                          raw bytes of page `base` as
 *                                          reference prefix (a delta), 4 a
 *                                          delta as 3 that also uses `dict`
 *                                          (reserved: zstd takes a prefix
 *                                          or a dictionary, not both)
 *    6  chunk shift u8                     chunks hold 2^shift raw bytes
 *                                          (0 when nchunks is 1)
 *    7  reserved u8                        0
 *    8  md5 [16]                           page: MD5 of the raw bytes
 *   24  variant u32                        page: blob variant (rec.h);
 *                                          dictionary: its id
 *   28  nchunks u32                        >= 1
 *   32  xxh128 [16]                        XXH3-128 of the raw bytes
 *                                          (canonical, big-endian)
 *   48  raw size u64
 *   56  payload bytes u64                  what follows the header
 *   64  dict u32                           dictionary id, 0: none
 *   68  base md5 [16] | base variant u32   page the delta is against
 *                                          (zero unless encoding 3 or 4)
 *   88  check u64                          XXH3-64 of bytes 0..87
 *
 * Payload: when nchunks > 1, first a chunk table of nchunks entries of
 * PACK_CHUNK_ENT bytes (stored bytes u32 | margin u32 | xxh128 [16] of
 * the chunk's raw bytes), then the chunks' frames back to back. Chunk i
 * holds raw bytes [i << shift, min(size, (i+1) << shift)); each is
 * decodable alone (its own zstd frame, or raw bytes when encoding 0 or
 * when the frame would not be smaller: a chunk whose stored bytes equal
 * its raw bytes is raw). With one chunk the payload is the frame alone.
 * The margin is 0 except in a chunked delta (below).
 *
 * Deltas. A delta of one chunk (encoding 3, PACK_RF_BASE without
 * PACK_RF_CHUNKS) is one frame whose reference prefix is the whole raw
 * base. A chunked delta (encoding 3 with PACK_RF_BASE and PACK_RF_CHUNKS
 * both: a page over 2^shift bytes; written since store format 7) has a
 * frame per chunk, and chunk i's reference prefix is the window of the
 * base's raw bytes [max(0, lo - margin), min(base size, hi + margin)),
 * where [lo, hi) are the chunk's own raw bytes and margin is the chunk
 * entry's (at most 2^shift: a reader refuses more); an empty window (a base shorter than lo - margin) means no
 * prefix. So a read of one chunk decodes that chunk and the base's bytes
 * of its window only (through the base's own chunks, along the chain).
 * An older reader (which took the whole base as every chunk's prefix)
 * decodes other bytes, which the chunk's and the page's XXH3-128 refuse:
 * EIO, never other bytes; the store's format (7) keeps such readers
 * from opening the store at all, so PACK_VERSION stays 2.
 *
 * A dictionary record (kind 2) holds the raw dictionary bytes (encoding 0,
 * one chunk); md5 holds its id (u32) then zeros, variant its id.
 *
 * A reader trusts a record only if its header check matches, its identity
 * matches what LMDB expects, every chunk decodes to its length and the
 * XXH3-128 of what it decoded matches: otherwise the read is -EIO.
 *
 * The nursery. A page sealed at close() is appended to a nursery pack
 * (flags bit 0), a pack of the same format that takes only those
 * appends; a background step (ndelta.h) writes the page's final record
 * (a delta, or the page whole at the store's level) into a main pack and
 * points the page at it, after which the nursery record is dead. A
 * nursery pack with no live record left is removed whole (the
 * compactor's removal, blob.h); its records are never copied. Which
 * records of a nursery pack are still waiting is known from the packs
 * and the fingerprint table alone (a record is waiting when its page's
 * fingerprint record names its place), so nothing else need survive a
 * crash. Nursery packs are at most PACK_NURSERY_PACK_BYTES long and
 * share the id sequence with the main packs.
 *
 * Version 2 is written by this code, version 1 read: appends never go to
 * a version 1 pack (a store's next append starts a new pack), so a
 * version 1 pack holds layout 1 records only. A pack of a newer version
 * is refused (-EPROTO) rather than guessed at.
 * ---------------------------------------------------------------------------
 */
#ifndef PD_PACK_H
#define PD_PACK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PACK_VERSION 2
#define PACK_HDR_BYTES 64
#define PACK_REC_HDR 96             /* a layout 1 record header */
#define PACK_REC_MAGIC 0x31524450u  /* "PDR1": layout 1 */
#define PACK_REC_MAGIC2 0x32524450u /* "PDR2": layout 2 */
#define PACK_REC_LAYOUT 2           /* the layout new records get */
#define PACK_REC_HDR_MIN 45         /* layout 2: the smallest header */
#define PACK_REC_HDR_MAX 104        /* either layout fits in this */
/* Layout 2 header flags: the optional fields present. */
#define PACK_RF_VARIANT 1u
#define PACK_RF_DICT 2u
#define PACK_RF_BASE 4u
#define PACK_RF_CHUNKS 8u
#define PACK_RF_ALL 15u
#define PACK_CHUNK_ENT 24
#define PACK_ALIGN 8
#define PACK_DIR "packs"
#define PACK_NAME_MAX 32

enum pack_kind { PACK_KIND_PAGE = 1, PACK_KIND_DICT = 2 };
enum pack_enc {
	PACK_ENC_RAW = 0,
	PACK_ENC_ZSTD = 1,
	PACK_ENC_ZSTD_DICT = 2,
	PACK_ENC_DELTA = 3,
	PACK_ENC_DELTA_DICT = 4,
};
/* Does a record of this encoding need its base page's bytes? */
static inline bool pack_enc_is_delta(uint8_t encoding)
{
	return encoding == PACK_ENC_DELTA || encoding == PACK_ENC_DELTA_DICT;
}

/* Defaults, chosen by measurement (the issue-15 note has the figures). */
#define PACK_DEFAULT_MAX_BYTES (256ull << 20) /* a pack is closed past this */
#define PACK_DEFAULT_CHUNK_SHIFT 18          /* 256 KiB chunks */
#define PACK_DEFAULT_LEVEL 3                 /* zstd level */
#define PACK_DELTA_MARGIN (32u << 10)        /* a chunked delta's window of its
					      * base reaches this far either side
					      * (an inserted block shifts the rest
					      * of a page by up to a few KiB) */

#define PACK_FLAG_NURSERY 1u                 /* pack header flags: a nursery pack */
#define PACK_COLD_DELTAS 1u                  /* cold flags: deltas encoded cold too */
#define PACK_NURSERY_PACK_BYTES (32ull << 20) /* a nursery pack is closed past this */
/* The two streams of appends a set keeps. */
enum { PACK_MAIN = 0, PACK_NURSERY = 1, PACK_STREAMS = 2 };

/* Where a record is: pack id, offset of its header, header + payload bytes. */
struct pack_loc {
	uint32_t pack;
	uint64_t off;
	uint64_t len;
};

/* A decoded record header. */
struct pack_rec_hdr {
	uint8_t layout;   /* 1 or 2 (above) */
	uint32_t hdr_len; /* its bytes on disk: the payload follows */
	uint8_t kind, encoding, chunk_shift;
	uint8_t md5[16];
	uint32_t variant;
	uint32_t nchunks;
	uint8_t xxh128[16];
	uint64_t size;
	uint64_t payload;
	uint32_t dict;
	uint8_t base_md5[16];
	uint32_t base_variant;
};

/* A zstd dictionary ready for use: its bytes and zstd's digested forms
 * for decompression (made at once) and compression (at each level, on
 * its first use; level: the one used when an encode asks for none). */
struct pack_dict;
struct pack_dict *pack_dict_new(uint32_t id, const void *bytes, size_t len, int level);
void pack_dict_free(struct pack_dict *d);
/* Free d's compression forms (made again on the next encode with d):
 * only while no encode uses d. */
void pack_dict_drop_cdicts(struct pack_dict *d);
/* The bytes d takes in memory now (its bytes, zstd's forms). */
size_t pack_dict_memory(const struct pack_dict *d);
uint32_t pack_dict_id(const struct pack_dict *d);
const void *pack_dict_bytes(const struct pack_dict *d, size_t *len);
/* Train a dictionary of at most cap bytes on n samples laid end to end
 * (ZDICT_trainFromBuffer); *out malloc'd. -EINVAL when zstd cannot (too
 * few or too alike samples). */
int pack_dict_train(const void *samples, const size_t *sizes, unsigned n, size_t cap, void **out, size_t *len);

/* How to encode a page. dict: a dictionary, or NULL; base/base_len: the raw
 * bytes of the page a delta is taken against (with base_md5/base_variant
 * naming it), or NULL (a delta uses no dictionary). level: zstd level, 0
 * for raw records. */
struct pack_encode_opts {
	int level;
	unsigned chunk_shift;
	const struct pack_dict *dict;
	const void *base;
	size_t base_len;
	uint8_t base_md5[16];
	uint32_t base_variant;
	/* A page over a chunk taken as a delta: each chunk's window of the
	 * base reaches this many bytes either side of its own place (0:
	 * PACK_DELTA_MARGIN). */
	uint32_t base_margin;
};

/* An encoded record in memory (header and payload), ready to append. */
struct pack_rec {
	uint8_t *buf;
	size_t len;
	struct pack_rec_hdr hdr;
};
void pack_rec_free(struct pack_rec *r);

/* Encode page bytes as a record. Bytes come from memory (buf) or, when buf
 * is NULL, from fd (pread, chunk by chunk). xxh128 is the XXH3-128 the
 * caller computed of the bytes (canonical). -ENOMEM, -errno of a read. */
int pack_encode_page(const uint8_t md5[16], uint32_t variant, const uint8_t xxh128[16], const void *buf,
		     int fd, uint64_t size, const struct pack_encode_opts *o, struct pack_rec *out);
/* Encode a dictionary as a record of its own. */
int pack_encode_dict(uint32_t id, const void *dict, size_t len, struct pack_rec *out);
/* Change the identity a built page record carries (its variant is chosen
 * in the transaction, after the bytes were encoded). The header's length
 * may change with it (layout 2). -ENOMEM. */
int pack_rec_set_id(struct pack_rec *r, const uint8_t md5[16], uint32_t variant);
/* Give a record (built, or read by pack_read_rec) header layout 1 or 2,
 * its payload unchanged (the compactor gives copied layout 1 records
 * layout 2; tests make layout 1 records). -EINVAL, -ENOMEM. */
int pack_rec_set_layout(struct pack_rec *r, unsigned layout);

/* The packs of one store. Appends are serialised inside; reads run in
 * parallel (pread on cached descriptors). */
struct pack_set;

/* Open dirfd/packs (made when missing unless readonly). max_bytes: the size
 * past which the current pack is closed and the next one started (0:
 * PACK_DEFAULT_MAX_BYTES). */
int pack_set_open(int dirfd, bool readonly, uint64_t max_bytes, struct pack_set **out);
void pack_set_close(struct pack_set *ps);

/* Append a record to the current pack (started or rolled over as needed);
 * sync: fdatasync the pack (and, for a new pack, its directory) before
 * returning. *loc is where it went. -ENOSPC when the disk is full: the pack
 * is cut back to where it was, nothing else changes. */
int pack_append(struct pack_set *ps, const struct pack_rec *r, bool sync, struct pack_loc *loc);
/* The same into the nursery (its own packs, pack.h's format). */
int pack_append_nursery(struct pack_set *ps, const struct pack_rec *r, bool sync, struct pack_loc *loc);
/* Make every appended record durable (the packs written since the last
 * sync, main and nursery). */
int pack_sync(struct pack_set *ps);
/* The same for the main packs alone: what a commit naming only records
 * appended with pack_append needs before it (the delta step's moves out
 * of the nursery), without waiting for the nursery's own writes. */
int pack_sync_main(struct pack_set *ps);

/* Read and check the header of the record at loc. -EIO if it is not an
 * intact record header, or its length disagrees with loc. */
int pack_read_hdr(struct pack_set *ps, const struct pack_loc *loc, struct pack_rec_hdr *h);

/* Dictionaries a decode needs: the caller resolves an id to its bytes. */
struct pack_deps {
	/* Dictionary id (owned by the caller, valid until the decode
	 * returns), or NULL. */
	const struct pack_dict *(*dict)(void *ctx, uint32_t id);
	/* Raw bytes of the base page (malloc'd; the decoder frees), or NULL. */
	void *(*base)(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t *len);
	void *ctx;
	/* The base's raw bytes [off, off + len) clipped to its size, into
	 * out; *got the bytes given, *size the base's size: 0 or -errno. A
	 * chunk of a chunked delta decoded alone reads its window so; when
	 * NULL, the whole base is taken through `base`. */
	int (*base_range)(void *ctx, const uint8_t md5[16], uint32_t variant, uint64_t off, size_t len, void *out,
			  size_t *got, uint64_t *size);
};

/* Decode the whole page at loc into out (size bytes, the caller's buffer),
 * checking that it is page md5/variant of `size` bytes with XXH3-128 xxh128
 * (NULL: not checked against an expectation, only against the record).
 * -EIO for any damage or mismatch. */
int pack_read_page(struct pack_set *ps, const struct pack_loc *loc, const uint8_t md5[16], uint32_t variant,
		   uint64_t size, const uint8_t *xxh128, const struct pack_deps *deps, void *out);
/* Decode the chunks that cover [off, off+len) of the page at loc into out
 * (len bytes; the range lies inside the page). Only those chunks are read
 * and each is checked against its own XXH3-128. */
int pack_read_range(struct pack_set *ps, const struct pack_loc *loc, const uint8_t md5[16], uint32_t variant,
		    const struct pack_deps *deps, uint64_t off, size_t len, void *out);
/* The dictionary record at loc (malloc'd bytes). */
int pack_read_dict(struct pack_set *ps, const struct pack_loc *loc, uint32_t id, void **out, size_t *len);

/* Walk every record of pack id in order. fn gets each intact header and
 * its place; a damaged stretch is skipped to the next intact header
 * (*damaged counts the bytes skipped). fn returning non-zero stops the
 * walk with that value. */
int pack_scan(struct pack_set *ps, uint32_t id,
	      int (*fn)(void *ctx, const struct pack_rec_hdr *h, const struct pack_loc *loc), void *ctx,
	      uint64_t *damaged);

/* The ids of the pack files present, ascending (malloc'd). */
int pack_list(struct pack_set *ps, uint32_t **ids, size_t *n);
/* Bytes of pack id on disk (its length), or -errno. */
int64_t pack_file_bytes(struct pack_set *ps, uint32_t id);
/* Its length and the bytes the filesystem allocates to it (less than the
 * length where dead records were punched out). */
struct pack_space {
	uint64_t length, allocated;
};
int pack_space(struct pack_set *ps, uint32_t id, struct pack_space *out);
/* Give the disk blocks of the (dead) record at loc back to the filesystem
 * (fallocate PUNCH_HOLE; the file keeps its length and its other records).
 * -EOPNOTSUPP where the filesystem cannot. */
int pack_punch(struct pack_set *ps, const struct pack_loc *loc);
/* Remove pack id (after the commit that moved its last live record; the
 * compactor, blob_compact.c): the file is unlinked (and the directory
 * synced) at once; a read in progress on it finishes on its descriptor,
 * which its last reader closes; a later read of it is -EIO. -EBUSY for
 * the pack taking appends. */
int pack_remove(struct pack_set *ps, uint32_t id);
/* If pack id takes the main appends, start the next pack (sync: the new
 * file and its directory durable first); if it takes the nursery's, the
 * next nursery append starts one. Either way id receives no more. */
int pack_rollover(struct pack_set *ps, uint32_t id, bool sync);
/* Packs being removed: pack_retire(id, true) before the transaction that
 * decides a removal, false if it does not happen. A commit that would
 * name a record in a retired pack refuses (pack_retired: the caller
 * fails it), so that nothing names a pack after its removal. */
int pack_retire(struct pack_set *ps, uint32_t id, bool on);
bool pack_retired(struct pack_set *ps, uint32_t id);
/* The whole record at loc as it is on disk (out->buf malloc'd; pack_rec_free),
 * its header decoded and checked (-EIO: not an intact record header, or
 * its length disagrees with loc). A record is position-independent, so
 * these bytes can be appended elsewhere as they are. */
int pack_read_rec(struct pack_set *ps, const struct pack_loc *loc, struct pack_rec *out);
/* Pack id is about to be read whole out of its order (the compactor's
 * pass in path order, blob_compact.c): the kernel is asked to read it
 * ahead now, in one sequential sweep, rather than record by record at
 * random (a hint: what it cannot do costs nothing). */
void pack_prefetch(struct pack_set *ps, uint32_t id);
/* Decode a record read by pack_read_rec in memory and check it (every
 * chunk, the XXH3-128 of the raw bytes): 0, or -EIO when it is damaged. */
int pack_rec_check(const struct pack_rec *r, const struct pack_deps *deps);
/* The same, keeping what it decoded: *out (malloc'd, hdr.size bytes) the
 * page's raw bytes, checked against its XXH3-128. -EIO, -ENOMEM. */
int pack_rec_decode(const struct pack_rec *r, const struct pack_deps *deps, void **out);
/* The cold mark of a pack header (pack.h's format: bytes 32..39). */
struct pack_cold {
	uint8_t level;  /* 0: no mark */
	bool deltas;    /* deltas were encoded cold too (PACK_COLD_DELTAS) */
	uint8_t window; /* whole pages were tried as deltas on this many before them */
	uint32_t dict;  /* the dictionary whole pages were encoded with, 0: none */
};
/* Main packs started from now on carry mark (NULL: none), and the main
 * pack taking appends takes no more (the next append starts a pack), so
 * that a marked pack holds only what was appended while the mark was set.
 * The caller makes sure that only the cold pass appends meanwhile. */
void pack_set_cold(struct pack_set *ps, const struct pack_cold *mark);
/* The cold mark of pack id (level 0: none) and when the pack was
 * started (*created, may be NULL: its header's seconds). -ENOENT, -EIO,
 * -EPROTO. */
int pack_cold_of(struct pack_set *ps, uint32_t id, struct pack_cold *out, uint64_t *created);
/* The pack appends go to now (0 before the first). */
uint32_t pack_current(struct pack_set *ps);
/* The nursery pack taking appends now (0: none). */
uint32_t pack_nursery_current(struct pack_set *ps);
/* Is pack id a nursery pack? */
bool pack_is_nursery(struct pack_set *ps, uint32_t id);
/* The nursery packs present (ascending, malloc'd) and their length in all. */
int pack_nursery_list(struct pack_set *ps, uint32_t **ids, size_t *n);
uint64_t pack_nursery_bytes(struct pack_set *ps);
void pack_name(uint32_t id, char out[PACK_NAME_MAX]);

#endif
