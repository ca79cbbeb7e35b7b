/* fallocate.h - fallocate(2) on a file open for writing, in the terms a
 * store of sealed blobs can keep (fallocate.c). */
#ifndef PD_FALLOCATE_H
#define PD_FALLOCATE_H

#include <stdint.h>

struct store;
struct pd_file;

/* mode as fallocate(2) takes it. Supported:
 *   0                          the size grows to off+len if smaller
 *                              (the new bytes read as zeros);
 *   FALLOC_FL_KEEP_SIZE        nothing to do (blocks are not reserved:
 *                              a page's bytes are staged, then sealed);
 *   FALLOC_FL_PUNCH_HOLE|KEEP_SIZE
 *                              the range within the size reads as zeros;
 *   FALLOC_FL_ZERO_RANGE [|KEEP_SIZE]
 *                              the same, and without KEEP_SIZE the size
 *                              grows to off+len.
 * The file is then dirty and is sealed at its close, as after a write.
 * Other modes (COLLAPSE_RANGE, INSERT_RANGE, UNSHARE_RANGE): -EOPNOTSUPP. */
int file_fallocate(struct store *st, struct pd_file *f, int mode, uint64_t off, uint64_t len);

#endif
