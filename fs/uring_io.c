/* uring_io.c - FUSE over io_uring: a request is served on the CPU that made
 * it.
 *
 * Why. Every FUSE request is a synchronous round trip: the caller sleeps
 * until a daemon thread has read the request, done the work and written
 * the reply. With /dev/fuse the kernel wakes whichever worker thread waits,
 * often on the other CPU, and then wakes the caller back across CPUs; on a
 * virtual machine each cross-CPU wake-up of an idle CPU is an interrupt
 * that leaves the guest. Measured on this project's 2-CPU test machine, an
 * open() + close() of a mounted file: 24 us with the daemon and the caller
 * held on one CPU, 60 us as the scheduler places them, 144 us held apart.
 * Since Linux 6.14 a FUSE server may instead register io_uring commands
 * per CPU queue: the kernel puts a request in the queue of the CPU its
 * caller runs on, and completes the command of a thread that waits there.
 * Threads pinned to that CPU then serve it without a cross-CPU wake-up in
 * either direction.
 *
 * How. libfuse 3.14 knows nothing of this, so the protocol is spoken here
 * and libfuse keeps decoding requests and building replies:
 * - the INIT reply asks for FUSE_OVER_IO_URING when the kernel offers it
 *   (kernel_io.c; the kernel offers it when the fuse module's
 *   enable_uring parameter is on);
 * - after INIT, -o uring_threads=N threads per CPU queue (4 unless told) each make an
 *   io_uring of their own and register one entry: a header buffer (the
 *   request's fuse_in_header, its per-operation argument struct, and the
 *   entry's payload size and commit id) and a payload buffer (the other
 *   arguments: names, data). Several entries per queue let a request that
 *   waits (a seal's commit, fsync) leave the CPU's other callers served;
 * - a completed command is a request: it is laid out as /dev/fuse would
 *   have delivered it (header, argument struct, payload; the payload
 *   buffer has room before it, so the data is not copied) and handed to
 *   fuse_session_process_buf();
 * - libfuse writes the reply through the write hook, which gives it back
 *   here (uring_io_take_reply); it goes into the entry's buffers, and the
 *   next command commits it and fetches the next request in one system
 *   call.
 * Requests the kernel does not send over the ring (INIT, FORGET,
 * INTERRUPT, and everything until every queue has an entry) and
 * notifications keep using /dev/fuse and libfuse's own loop.
 *
 * Every operation of this daemon replies before it returns, which is what
 * lets a reply be matched to the request this thread is serving. The
 * ring's system calls are made directly (no liburing): one SQE in flight
 * per thread, plus a poll of the stop eventfd.
 */

#define FUSE_USE_VERSION 314

#include "uring_io.h"

#include <errno.h>
#include <linux/fuse.h>
#include <linux/io_uring.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <unistd.h>

#include "kernel_io.h"

/* The protocol's structures (Linux include/uapi/linux/fuse.h, 7.42); the
 * 7.38 header this builds against predates them. */
#define URING_HEADER_IN_OUT_SIZE 128
#define URING_OP_IN_SIZE 128
#define URING_CMD_REGISTER 1
#define URING_CMD_COMMIT_AND_FETCH 2

struct uring_ent_in_out {
	uint64_t flags;
	uint64_t commit_id; /* the request's unique, echoed by the commit */
	uint32_t payload_sz;
	uint32_t padding;
	uint64_t reserved;
};

struct uring_req_header {
	char in_out[URING_HEADER_IN_OUT_SIZE]; /* fuse_in_header / fuse_out_header */
	char op_in[URING_OP_IN_SIZE];	       /* the operation's argument struct */
	struct uring_ent_in_out ent;
};

struct uring_cmd_req { /* in the SQE's 80-byte command area */
	uint64_t flags;
	uint64_t commit_id;
	uint16_t qid;
	uint8_t padding[6];
};

#define SQE_SIZE 128 /* IORING_SETUP_SQE128: the command area needs it */
#define RING_ENTRIES 4
#define TAG_ENTRY 1
#define TAG_STOP 2
/* Room before the payload for the header and argument struct, so that a
 * request is contiguous as libfuse wants it without moving its data. */
#define LEAD (sizeof(struct fuse_in_header) + URING_OP_IN_SIZE)

struct ring {
	int fd;
	unsigned qid;
	pthread_t thread;
	bool started, registered;
	/* the mapped rings */
	void *sq_map, *cq_map, *sqe_map;
	size_t sq_map_len, cq_map_len, sqe_map_len;
	unsigned *sq_head, *sq_tail, *sq_mask, *sq_array;
	unsigned *cq_head, *cq_tail, *cq_mask;
	struct io_uring_cqe *cqes;
	char *sqes;
	unsigned to_submit;
	/* the registered entry */
	struct uring_req_header *header;
	char *buf; /* LEAD bytes, then the payload */
	size_t payload_size;
	struct iovec iov[2];
	uint64_t unique;
	bool replied;
};

static struct {
	bool wanted;
	unsigned threads_per_cpu;
	struct fuse_session *se;
	int fuse_fd, stop_fd;
	struct ring *rings;
	unsigned nrings;
	unsigned registered;
} uring = { .wanted = true, .threads_per_cpu = 4, .stop_fd = -1 };

static _Thread_local struct ring *serving;

void uring_io_configure(bool wanted, unsigned threads_per_cpu)
{
	uring.wanted = wanted;
	if (threads_per_cpu > 0 && threads_per_cpu <= 64)
		uring.threads_per_cpu = threads_per_cpu;
}

bool uring_io_wanted(void)
{
	return uring.wanted;
}

/* ---- the ring itself ---- */

static void *map_ring(int fd, size_t len, off_t off)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, off);
	return p == MAP_FAILED ? NULL : p;
}

#define AT(base, off) ((unsigned *)((char *)(base) + (off)))

static int ring_setup(struct ring *r)
{
	struct io_uring_params p = { .flags = IORING_SETUP_SQE128 };
	r->fd = (int)syscall(__NR_io_uring_setup, RING_ENTRIES, &p);
	if (r->fd < 0)
		return -errno;
	r->sq_map_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
	r->cq_map_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
	r->sqe_map_len = p.sq_entries * SQE_SIZE;
	r->sq_map = map_ring(r->fd, r->sq_map_len, IORING_OFF_SQ_RING);
	r->cq_map = map_ring(r->fd, r->cq_map_len, IORING_OFF_CQ_RING);
	r->sqe_map = map_ring(r->fd, r->sqe_map_len, IORING_OFF_SQES);
	if (!r->sq_map || !r->cq_map || !r->sqe_map)
		return -ENOMEM;
	r->sq_head = AT(r->sq_map, p.sq_off.head);
	r->sq_tail = AT(r->sq_map, p.sq_off.tail);
	r->sq_mask = AT(r->sq_map, p.sq_off.ring_mask);
	r->sq_array = AT(r->sq_map, p.sq_off.array);
	r->cq_head = AT(r->cq_map, p.cq_off.head);
	r->cq_tail = AT(r->cq_map, p.cq_off.tail);
	r->cq_mask = AT(r->cq_map, p.cq_off.ring_mask);
	r->cqes = (struct io_uring_cqe *)((char *)r->cq_map + p.cq_off.cqes);
	r->sqes = r->sqe_map;
	return 0;
}

static void ring_unmap(struct ring *r)
{
	if (r->sq_map)
		munmap(r->sq_map, r->sq_map_len);
	if (r->cq_map)
		munmap(r->cq_map, r->cq_map_len);
	if (r->sqe_map)
		munmap(r->sqe_map, r->sqe_map_len);
	if (r->fd >= 0)
		close(r->fd);
	if (r->header)
		munmap(r->header, sizeof *r->header);
	if (r->buf)
		munmap(r->buf, LEAD + r->payload_size);
	r->sq_map = r->cq_map = r->sqe_map = NULL;
	r->header = NULL;
	r->buf = NULL;
	r->fd = -1;
}

/* A zeroed SQE at the tail of the submission queue (one thread uses the
 * ring, and never has more than two SQEs out of RING_ENTRIES). */
static struct io_uring_sqe *ring_next_sqe(struct ring *r)
{
	unsigned tail = *r->sq_tail, idx = tail & *r->sq_mask;
	struct io_uring_sqe *sqe = (struct io_uring_sqe *)(r->sqes + (size_t)idx * SQE_SIZE);
	memset(sqe, 0, SQE_SIZE);
	r->sq_array[idx] = idx;
	__atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
	r->to_submit++;
	return sqe;
}

static void queue_fuse_cmd(struct ring *r, uint32_t cmd, uint64_t commit_id)
{
	struct io_uring_sqe *sqe = ring_next_sqe(r);
	sqe->opcode = IORING_OP_URING_CMD;
	sqe->fd = uring.fuse_fd;
	sqe->cmd_op = cmd;
	sqe->user_data = TAG_ENTRY;
	if (cmd == URING_CMD_REGISTER) {
		sqe->addr = (uint64_t)(uintptr_t)r->iov;
		sqe->len = 2;
	}
	struct uring_cmd_req req = { .commit_id = commit_id, .qid = (uint16_t)r->qid };
	memcpy(sqe->cmd, &req, sizeof req);
}

static void queue_stop_poll(struct ring *r)
{
	struct io_uring_sqe *sqe = ring_next_sqe(r);
	sqe->opcode = IORING_OP_POLL_ADD;
	sqe->fd = uring.stop_fd;
	sqe->poll32_events = POLLIN;
	sqe->user_data = TAG_STOP;
}

/* Submits what is queued and waits for one completion: its tag and result. */
static int ring_wait(struct ring *r, uint64_t *tag, int32_t *res)
{
	for (;;) {
		unsigned head = *r->cq_head;
		if (head != __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE)) {
			struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
			*tag = c->user_data;
			*res = c->res;
			__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
			return 0;
		}
		long n = syscall(__NR_io_uring_enter, r->fd, r->to_submit, 1, IORING_ENTER_GETEVENTS, NULL, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			r->to_submit -= (unsigned)n < r->to_submit ? (unsigned)n : r->to_submit;
	}
}

/* ---- one entry: buffers, requests, replies ---- */

static int entry_setup(struct ring *r, size_t payload_size)
{
	r->payload_size = payload_size;
	r->header = mmap(NULL, sizeof *r->header, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	r->buf = mmap(NULL, LEAD + payload_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (r->header == MAP_FAILED || r->buf == MAP_FAILED) {
		r->header = r->header == MAP_FAILED ? NULL : r->header;
		r->buf = r->buf == MAP_FAILED ? NULL : r->buf;
		return -ENOMEM;
	}
	r->iov[0] = (struct iovec){ r->header, sizeof *r->header };
	r->iov[1] = (struct iovec){ r->buf + LEAD, payload_size };
	return 0;
}

/* Lays the request out as /dev/fuse delivers it and lets libfuse process
 * it; the reply comes back through uring_io_take_reply(). */
static void serve_request(struct ring *r)
{
	struct fuse_in_header in;
	memcpy(&in, r->header->in_out, sizeof in);
	uint32_t payload = r->header->ent.payload_sz;
	/* The header's len counts every argument; the argument struct is
	 * what the payload does not hold. */
	size_t arg_len = in.len - sizeof in - payload;
	r->unique = in.unique;
	r->replied = false;
	if (in.len < sizeof in + payload || arg_len > URING_OP_IN_SIZE || payload > r->payload_size) {
		fprintf(stderr, "pagededupfs: malformed request from the kernel (opcode %u)\n", in.opcode);
		return;
	}
	char *start = r->buf + LEAD - arg_len - sizeof in;
	memcpy(start, &in, sizeof in);
	memcpy(start + sizeof in, r->header->op_in, arg_len);
	kernel_io_note_request(start, in.len);
	struct fuse_buf fb = { .mem = start, .size = in.len };
	serving = r;
	fuse_session_process_buf(uring.se, &fb);
	serving = NULL;
}

/* A request left without a reply would hold its caller forever. */
static void reply_error_if_none(struct ring *r)
{
	if (r->replied)
		return;
	struct fuse_out_header out = { .len = sizeof out, .error = -EIO, .unique = r->unique };
	memcpy(r->header->in_out, &out, sizeof out);
	r->header->ent.payload_sz = 0;
}

bool uring_io_take_reply(const struct iovec *iov, int count, ssize_t *written)
{
	struct ring *r = serving;
	struct fuse_out_header out;
	if (!r || count < 1 || iov[0].iov_len < sizeof out)
		return false;
	memcpy(&out, iov[0].iov_base, sizeof out);
	if (out.unique != r->unique || out.unique == 0)
		return false;
	size_t n = 0;
	for (int i = 1; i < count; i++) {
		if (iov[i].iov_len > r->payload_size - n) {
			out.error = -EIO;
			n = 0;
			break;
		}
		memmove(r->buf + LEAD + n, iov[i].iov_base, iov[i].iov_len);
		n += iov[i].iov_len;
	}
	out.len = (uint32_t)(sizeof out + n);
	memcpy(r->header->in_out, &out, sizeof out);
	r->header->ent.payload_sz = (uint32_t)n;
	r->replied = true;
	*written = (ssize_t)out.len;
	return true;
}

/* ---- the threads ---- */

static void pin_to_cpu(unsigned cpu)
{
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	/* Outside the CPUs the daemon may use (taskset, cpusets) the thread
	 * stays unpinned: slower wake-ups, same answers. */
	(void)pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

static bool fatal_result(int32_t res)
{
	return res == -ENOTCONN || res == -ECONNABORTED || res == -ENODEV || res == -EOPNOTSUPP ||
	       res == -EINVAL;
}

/* Once every entry is registered, the kernel sends everything but INIT,
 * FORGET and INTERRUPT over the rings; the log line says so (and tests
 * wait for it). */
static void note_registered(struct ring *r)
{
	char name[16];
	r->registered = true;
	snprintf(name, sizeof name, "pdfs-ring-%u", r->qid);
	pthread_setname_np(pthread_self(), name);
	if (__atomic_add_fetch(&uring.registered, 1, __ATOMIC_ACQ_REL) == uring.nrings)
		fprintf(stderr, "pagededupfs: serving requests over io_uring: %u CPU queues, %u threads each\n",
			uring.nrings / uring.threads_per_cpu, uring.threads_per_cpu);
}

/* Submits what is queued without waiting. */
static int ring_submit(struct ring *r)
{
	while (r->to_submit) {
		long n = syscall(__NR_io_uring_enter, r->fd, r->to_submit, 0, 0, NULL, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		if (n > 0)
			r->to_submit -= (unsigned)n < r->to_submit ? (unsigned)n : r->to_submit;
	}
	return 0;
}

/* The result of the completion at the head of the queue, if one is there
 * for the entry; consumed only when it is an error. */
static bool ring_entry_failed(struct ring *r, int32_t *res)
{
	unsigned head = *r->cq_head;
	if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
		return false;
	struct io_uring_cqe *c = &r->cqes[head & *r->cq_mask];
	if (c->user_data != TAG_ENTRY || c->res >= 0)
		return false;
	*res = c->res;
	__atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
	return true;
}

/* A registered command stays queued in the kernel until a request comes:
 * no completion right after the submission means the entry is in. */
static int register_entry(struct ring *r)
{
	for (int attempt = 0; attempt < 200; attempt++) {
		queue_fuse_cmd(r, URING_CMD_REGISTER, 0);
		int32_t res = 0;
		int rc = ring_submit(r);
		if (rc)
			return rc;
		if (!ring_entry_failed(r, &res)) {
			note_registered(r);
			return 0;
		}
		if (res != -EAGAIN && res != -EINTR)
			return res;
		usleep(5000); /* the kernel has not finished INIT yet */
	}
	return -EAGAIN;
}

static void *ring_thread(void *arg)
{
	struct ring *r = arg;
	uint64_t tag = 0;
	int32_t res = 0;
	pin_to_cpu(r->qid);
	queue_stop_poll(r);
	int rc = register_entry(r);
	if (rc) {
		if (!fatal_result(rc))
			fprintf(stderr, "pagededupfs: io_uring queue %u: %s\n", r->qid, strerror(-rc));
		return NULL;
	}
	for (;;) {
		if (ring_wait(r, &tag, &res) != 0 || tag == TAG_STOP)
			break;
		if (res == -EAGAIN || res == -EINTR) {
			queue_fuse_cmd(r, URING_CMD_COMMIT_AND_FETCH, r->unique);
			continue;
		}
		if (res < 0) {
			if (!fatal_result(res))
				fprintf(stderr, "pagededupfs: io_uring queue %u: %s\n", r->qid, strerror(-res));
			break;
		}
		serve_request(r);
		reply_error_if_none(r);
		queue_fuse_cmd(r, URING_CMD_COMMIT_AND_FETCH, r->unique);
	}
	return NULL;
}

static int ring_start(struct ring *r, unsigned qid, size_t payload_size)
{
	r->qid = qid;
	int rc = ring_setup(r);
	if (rc == 0)
		rc = entry_setup(r, payload_size);
	if (rc == 0)
		rc = -pthread_create(&r->thread, NULL, ring_thread, r);
	r->started = rc == 0;
	return rc;
}

void uring_io_start(struct fuse_session *se, int fuse_fd, size_t payload_size)
{
	if (uring.rings)
		return;
	unsigned ncpu = (unsigned)get_nprocs_conf(); /* the kernel keeps a queue per possible CPU */
	uring.se = se;
	uring.fuse_fd = fuse_fd;
	uring.stop_fd = eventfd(0, EFD_CLOEXEC);
	uring.nrings = ncpu * uring.threads_per_cpu;
	uring.rings = calloc(uring.nrings, sizeof *uring.rings);
	if (uring.stop_fd < 0 || !uring.rings) {
		fprintf(stderr, "pagededupfs: io_uring not used: %s\n", strerror(errno));
		return;
	}
	for (unsigned i = 0; i < uring.nrings; i++)
		uring.rings[i].fd = -1;
	for (unsigned i = 0; i < uring.nrings; i++) {
		int rc = ring_start(&uring.rings[i], i % ncpu, payload_size);
		if (rc != 0) {
			fprintf(stderr, "pagededupfs: io_uring queue %u: %s\n", i % ncpu, strerror(-rc));
			break;
		}
	}
}

void uring_io_stop(void)
{
	if (!uring.rings)
		return;
	uint64_t one = 1;
	if (write(uring.stop_fd, &one, sizeof one) != sizeof one)
		fprintf(stderr, "pagededupfs: cannot wake the io_uring threads\n");
	for (unsigned i = 0; i < uring.nrings; i++) {
		struct ring *r = &uring.rings[i];
		if (r->started)
			pthread_join(r->thread, NULL);
		ring_unmap(r);
	}
	free(uring.rings);
	uring.rings = NULL;
	close(uring.stop_fd);
	uring.stop_fd = -1;
}
