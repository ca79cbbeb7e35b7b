/* fallocate.c - fallocate(2) on a staged file. See fallocate.h.
 *
 * Tools call fallocate before they write (rsync --preallocate, aria2,
 * curl, databases, cp --sparse): mode 0 and KEEP_SIZE are what they need,
 * and both are cheap here, since a page being written lives in staging
 * and takes its space when written. Punching a hole or zeroing a range is
 * done by writing zeros through the write path (so that the MD5 streamed
 * at write time stays right, or is recomputed at the seal); it costs a
 * write of the range, not more. */
#include "fallocate.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <stdlib.h>

#include "openfile.h"
#include "store/rec.h"

#define ZERO_CHUNK (64 * 1024)

static int write_zeros(struct pd_file *f, uint64_t off, uint64_t end)
{
	static const char zeros[ZERO_CHUNK];
	while (off < end) {
		size_t n = end - off < ZERO_CHUNK ? (size_t)(end - off) : ZERO_CHUNK, done;
		int rc = file_write(f, zeros, n, off, &done);
		if (rc)
			return rc;
		if (!done)
			return -EIO;
		off += done;
	}
	return 0;
}

int file_fallocate(struct store *st, struct pd_file *f, int mode, uint64_t off, uint64_t len)
{
	if (len == 0 || off + len < off)
		return -EINVAL;
	uint64_t ino = file_ino(f), end = off + len;
	struct inode in;
	int rc = file_getattr(st, ino, &in);
	if (rc)
		return rc;
	bool keep = mode & FALLOC_FL_KEEP_SIZE;
	switch (mode & ~FALLOC_FL_KEEP_SIZE) {
	case 0:
		return keep || end <= in.size ? 0 : file_truncate(st, ino, end, f);
	case FALLOC_FL_PUNCH_HOLE:
		if (!keep)
			return -EOPNOTSUPP; /* as fallocate(2): a hole keeps the size */
		return write_zeros(f, off, end < in.size ? end : in.size);
	case FALLOC_FL_ZERO_RANGE:
		if ((rc = write_zeros(f, off, end < in.size ? end : in.size)))
			return rc;
		return keep || end <= in.size ? 0 : file_truncate(st, ino, end, f);
	default:
		return -EOPNOTSUPP;
	}
}
