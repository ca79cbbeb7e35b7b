/* fdio.h - whole reads and writes on a file descriptor: the loops that
 * retry after EINTR and after short transfers, so that callers see all the
 * bytes or an error. */
#ifndef PD_FDIO_H
#define PD_FDIO_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Write all len bytes (at the file offset, or at off): 0, or -errno
 * (-EIO if the kernel accepts no bytes without saying why). */
int fd_write_all(int fd, const void *buf, size_t len);
int fd_pwrite_all(int fd, const void *buf, size_t len, uint64_t off);

/* Read from off until len bytes or the end of the file: the bytes read
 * (fewer than len only at the end), or -errno. */
ssize_t fd_pread_full(int fd, void *buf, size_t len, uint64_t off);

/* Bytes free to an unprivileged writer on the file system that holds fd
 * (or, fd < 0, path): 0, or -errno. */
int fd_free_bytes(int fd, const char *path, uint64_t *bytes);

#endif
