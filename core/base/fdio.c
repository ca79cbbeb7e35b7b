/* fdio.c - whole reads and writes on a file descriptor. See fdio.h. */
#include "fdio.h"

#include <errno.h>
#include <stddef.h>
#include <sys/statvfs.h>
#include <unistd.h>

/* write() at the file offset, or pwrite() at *off. */
static int write_whole(int fd, const void *buf, size_t len, const uint64_t *off)
{
	for (size_t done = 0; done < len;) {
		const char *p = (const char *)buf + done;
		ssize_t n = off ? pwrite(fd, p, len - done, (off_t)(*off + done)) : write(fd, p, len - done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? -errno : -EIO;
		done += (size_t)n;
	}
	return 0;
}

int fd_write_all(int fd, const void *buf, size_t len)
{
	return write_whole(fd, buf, len, NULL);
}

int fd_pwrite_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return write_whole(fd, buf, len, &off);
}

ssize_t fd_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
	size_t done = 0;
	while (done < len) {
		ssize_t n = pread(fd, (char *)buf + done, len - done, (off_t)(off + done));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			break;
		done += (size_t)n;
	}
	return (ssize_t)done;
}

int fd_free_bytes(int fd, const char *path, uint64_t *bytes)
{
	struct statvfs v;
	if (fd >= 0 ? fstatvfs(fd, &v) : statvfs(path, &v))
		return -errno;
	*bytes = (uint64_t)v.f_bavail * v.f_frsize;
	return 0;
}
