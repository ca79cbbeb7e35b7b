/* thread.c - background threads' names, priorities and stop (thread.h). */
#include "thread.h"

#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void thread_background(const char *name, int nice)
{
	pthread_setname_np(pthread_self(), name);
	/* Linux: a thread's nice value is its own (setpriority of its tid).
	 * Best effort: a failure leaves it at the process's. */
	if (nice > 0)
		setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

void thread_stop_join(pthread_t thr, pthread_mutex_t *mu, pthread_cond_t *cv, bool *stop, bool *running)
{
	if (running && !*running)
		return;
	pthread_mutex_lock(mu);
	*stop = true;
	pthread_cond_signal(cv);
	pthread_mutex_unlock(mu);
	pthread_join(thr, NULL);
	if (running)
		*running = false;
}
