/* test_fdio.c - whole reads and writes (base/fdio.h): a pread past the
 * end returns the bytes there are; a write to a descriptor that is not
 * open is -EBADF; the free bytes of a file system read through a
 * descriptor and through a path agree, shrink by what a file takes once
 * allocated, and a path that does not exist is -ENOENT. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "base/fdio.h"
#include "helpers.h"

static void test_pread_to_the_end(void **state)
{
	(void)state;
	char *dir = th_tmpdir(), path[4200], buf[64];
	snprintf(path, sizeof path, "%s/f", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	assert_int_equal(fd_pwrite_all(fd, "0123456789", 10, 0), 0);
	assert_int_equal(fd_pread_full(fd, buf, sizeof buf, 4), 6);
	assert_memory_equal(buf, "456789", 6);
	assert_int_equal(fd_pread_full(fd, buf, sizeof buf, 10), 0);
	close(fd);
	assert_int_equal(fd_write_all(fd, "x", 1), -EBADF);
	th_rmdir(dir);
}

static void test_free_bytes(void **state)
{
	(void)state;
	char *dir = th_tmpdir(), path[4200];
	uint64_t by_path = 0, by_fd = 0, after = 0;
	int dfd = open(dir, O_RDONLY | O_DIRECTORY);
	assert_true(dfd >= 0);
	assert_int_equal(fd_free_bytes(-1, dir, &by_path), 0);
	assert_int_equal(fd_free_bytes(dfd, NULL, &by_fd), 0);
	assert_true(by_path > 0);
	/* the same file system read twice: within what others wrote meanwhile */
	assert_true(by_fd + (64u << 20) > by_path && by_path + (64u << 20) > by_fd);
	snprintf(path, sizeof path, "%s/big", dir);
	int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
	assert_true(fd >= 0);
	if (by_fd > (1ull << 30)) { /* room for 256 MiB and then some */
		assert_int_equal(posix_fallocate(fd, 0, 256 << 20), 0);
		assert_int_equal(fd_free_bytes(fd, NULL, &after), 0);
		assert_true(after + (192u << 20) < by_fd);
	}
	close(fd);
	snprintf(path, sizeof path, "%s/none/such", dir);
	assert_int_equal(fd_free_bytes(-1, path, &after), -ENOENT);
	close(dfd);
	th_rmdir(dir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pread_to_the_end),
		cmocka_unit_test(test_free_bytes),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
