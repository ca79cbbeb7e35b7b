/* query.h - the answers behind the dedup attributes (user.dedup.*):
 * fingerprint, refcount, twins and store statistics of a file, computed from
 * the tables. Answers that name paths list only the paths the caller may
 * reach (search permission on every directory, read on the file).
 */
#ifndef PD_QUERY_H
#define PD_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ns.h"
#include "store/store.h"

/* Largest answer, as the kernel allows for an xattr value. */
#define QUERY_MAX 65536

/* Each writes its text answer into buf (at most QUERY_MAX bytes) and sets
 * *len. -ENODATA when the file has no such value (not a regular file, or
 * not sealed yet). */
int query_md5(struct store *st, uint64_t ino, char *buf, size_t *len);
int query_refcount(struct store *st, uint64_t ino, char *buf, size_t *len);
/* Other files with the same bytes, one "/path" per line, nearest to the
 * root first; a last line "... N more" when the answer would not fit. */
int query_twins(struct store *st, uint64_t ino, const struct pd_cred *cred, char *buf, size_t *len);
/* The computed attributes' names. user.dedup.stats* on the root are the
 * store's figures (stats.h); on another directory, its subtree's; -ENODATA
 * on anything else. Three forms: JSON, text, text with human units. */
#define QUERY_ATTR_STATS "user.dedup.stats"
#define QUERY_ATTR_STATS_TEXT "user.dedup.stats.text"
#define QUERY_ATTR_STATS_HUMAN "user.dedup.stats.human"
/* Every computed attribute, NULL-terminated (for `pagededup attrs`; the
 * JSON and human forms of the stats are left out of it as repeats). */
extern const char *const query_attr_names[];
enum stats_format;
int query_stats(struct store *st, uint64_t ino, enum stats_format f, char *buf, size_t *len);

/* Near-duplicates (query_near.c): the other files whose page is a copy of
 * this one or resembles it, one line each (format version 2):
 *
 *   D[?] <TAB> R <TAB> copy|near <TAB> /path
 *
 *   D     the Hamming distance of the two simhashes, followed by '?' when
 *         either page has too little text for the distance to mean much
 *         (low-confidence);
 *   R     the resemblance of the two texts (word 5-shingles, as the confirm
 *         measures it: exact for pages of up to NEARSET_K shingles, else
 *         estimated, nearset.h), three decimals; "-" when a page stored
 *         before the shingle sets has none; 1.000 for a copy;
 *   copy  the same bytes (the same stored blob: a byte-identical twin);
 *   near  a variant: found within the store's distance K or by the LSH
 *         bands, and confirmed (resemblance >= NEARSET_NEAR).
 * Copies first, then nearest, then by path (bytes); a last line
 * "... N more" for the lines that did not fit. (Version 1, before the
 * shingle sets, was "D[?] <TAB> /path".) Every
 * name of a neighbour that the caller may reach is listed; the file's own
 * names are not. -ENODATA: binary or textless content, or not sealed;
 * -ESTALE: a store opened read-only whose signatures are of another
 * version (near.h). Pages whose signature is pending (sigq.h) are signed
 * first (a writable store drains its queue; what is left is signed in
 * memory), so the answer is the one synchronous signing would give. The
 * same holds for query_near_sig and query_simhash. */
int query_near(struct store *st, uint64_t ino, const struct pd_cred *cred, char *buf, size_t *len);
/* The same with prefix (NULL: none) before every path: the mountpoint, for
 * user.dedup.near.abs (absolute paths, as tools that open them want). A
 * path that the prefix makes too long for an answer is counted in the
 * "... N more" line. */
int query_near_prefixed(struct store *st, uint64_t ino, const struct pd_cred *cred, const char *prefix, char *buf,
			size_t *len);
/* The same answer for a page given by its signature (a page that need not
 * be in the store); names of inode `exclude` (0: none) are left out. */
struct near_sig;
/* The asking page's bytes, to tell copies (a blob with the same MD5,
 * XXH128 and size; has false: none are told), and where to read it back
 * for a pair too close to call by the estimate (nearset.h): its blob
 * (has_key), else the file at path, else the estimate decides. */
struct near_self {
	bool has;
	uint8_t md5[16], xxh128[16];
	uint64_t size;
	bool has_key;
	struct blobkey key;
	const char *path;
};
int query_near_sig(struct store *st, const struct near_sig *sig, const struct near_self *self, uint64_t exclude,
		   const struct pd_cred *cred, char *buf, size_t *len);
/* "<16 hex digits>", with " low-confidence" after it when the page has
 * little text, or "none" (binary or textless). */
int query_simhash(struct store *st, uint64_t ino, char *buf, size_t *len);
/* That text for a signature, into buf (at least 40 bytes); its length. */
size_t query_format_simhash(const struct near_sig *sig, char *buf);

/* The blob of a sealed regular file (in a read transaction); -ENODATA for
 * anything else. */
int query_sealed_blob(MDB_txn *txn, struct store *st, uint64_t ino, struct blobkey *k);

/* The first path of ino from the root ("/a/b"), for messages; "" when it
 * has no name left. */
int query_path(struct store *st, uint64_t ino, char *buf, size_t size);
/* The first path of a file on blob k ("" when none names it: a base kept
 * for its deltas), as query_path. */
int query_blob_path(struct store *st, const struct blobkey *k, char *buf, size_t size);

/* Is name one of the computed, read-only attributes? */
int query_is_dedup_attr(const char *name);

#endif
