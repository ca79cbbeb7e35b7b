/* query.h - the answers behind the dedup attributes (user.dedup.*):
 * fingerprint, refcount, twins and store statistics of a file, computed from
 * the tables. Answers that name paths list only the paths the caller may
 * reach (search permission on every directory, read on the file).
 */
#ifndef PD_QUERY_H
#define PD_QUERY_H

#include <stddef.h>
#include <stdint.h>

#include "ns.h"
#include "store.h"

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
int query_stats(struct store *st, char *buf, size_t *len);

/* Is name one of the computed, read-only attributes? */
int query_is_dedup_attr(const char *name);

#endif
