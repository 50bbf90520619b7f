/*
 * idlethread.c: preloaded into a C program (LD_PRELOAD), it starts one
 * thread that sleeps for good before main runs, so that the program is
 * multithreaded, as every Go program is. The VM harness's
 * -benchtracecidle runs rdma-core's perftest so, to tell whether the
 * kernel does a multithreaded process's work slower (docs/PERFORMANCE.md).
 * Test tooling only, like cbench.c: no goverbs code links C.
 */
#include <pthread.h>
#include <unistd.h>

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

__attribute__((constructor)) static void start_idle(void)
{
	pthread_t t;

	if (pthread_create(&t, NULL, idle, NULL) == 0)
		pthread_detach(t);
}
