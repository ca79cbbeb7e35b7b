/* auto_unmount.c - the order in which a killed daemon lets go of its mount.
 *
 * Under -o auto_unmount a root daemon mounts by itself and libfuse starts
 * fusermount3 with one end of a socket; fusermount3 waits for that socket
 * to close (the daemon's end), then unmounts only if opening the mount
 * point fails with ENOTCONN, that is only if the FUSE connection is
 * already gone. If the connection is still there its open waits, the
 * connection's abort answers it ECONNABORTED, and the mount stays for good.
 *
 * At exit the kernel closes a process's descriptors in order of number and
 * releases the files afterwards last closed first (task_work runs newest
 * first), and libfuse opens /dev/fuse before that socket: the socket went
 * first, and a watcher scheduled at once (the wakeup of a waiting task
 * preempts the exiting one on a busy machine) found the connection alive
 * in about one kill in five under load (tests/stress/s_auto_unmount.sh). A copy of the /dev/fuse descriptor
 * numbered above the socket is released before it, and with it the
 * connection (the per-thread clones of clone_fd are opened later still).
 */
#include "auto_unmount.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

static int held_fd = -1;

static int highest_open_fd(void)
{
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -errno;
	int top = -1;
	struct dirent *e;
	while ((e = readdir(d))) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		if (end != e->d_name && !*end && n > top)
			top = (int)n;
	}
	closedir(d);
	return top;
}

int auto_unmount_order_fds(int fuse_fd)
{
	int top = highest_open_fd();
	if (top < 0)
		return top;
	held_fd = fcntl(fuse_fd, F_DUPFD_CLOEXEC, top + 1);
	return held_fd < 0 ? -errno : 0;
}

void auto_unmount_release(void)
{
	if (held_fd >= 0)
		close(held_fd);
	held_fd = -1;
}
