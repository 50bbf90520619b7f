/*
 * cbench: rdma-core's side of goverbs' Go benchmarks (test/bench), the
 * same loops written against libibverbs, so that `make bench` can give each
 * Go figure a C figure from the same VM run.
 *
 * This is test code, not part of goverbs: goverbs itself has no cgo, and
 * nothing in the library or the tool uses this file. It lives in testdata/
 * so that the go command never looks at it. `make bench` (test/vm, bench
 * mode) compiles it on the host with gcc against Debian's libibverbs-dev
 * 44.0-2, the headers of the rdma-core the guest runs, and links it against
 * that libibverbs.so.1; the binary goes into the guest beside perftest.
 * Where the host has no gcc for the guest's architecture, the harness says
 * so and the Go benchmarks run without their C twins.
 *
 * Every benchmark mirrors one in bench_linux_test.go: the same device
 * (rxe0, GID index 1), the same queues (two 4096-entry CQs on one channel,
 * two connected RC QPs of 1024 WRs), the same work requests (signaled 8-byte
 * RDMA writes), the same batches, and the same rule for how long to run
 * (at least 100 ms of timed work, like go test -benchtime=100ms). It prints
 * one line per benchmark:
 *
 *	cbench <name> <iterations> <value> <unit>
 *
 * with <name> as the Go benchmark's name without "Benchmark".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/verbs.h>

#define CQ_SIZE 4096
#define QP_WRS 1024
#define BUF_SIZE (1 << 16)
#define TARGET_NS 100000000.0 /* 100 ms, as -test.benchtime=100ms */

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_comp_channel *ch;
static struct ibv_cq *scq, *rcq;
static struct ibv_qp *qa, *qb;
static struct ibv_mr *mr;
static char *buf;
static union ibv_gid gid;

static void die(const char *what, int err)
{
	fprintf(stderr, "cbench: %s: %s\n", what, strerror(err));
	exit(1);
}

static double now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static struct ibv_qp *new_qp(void)
{
	struct ibv_qp_init_attr a = {
		.send_cq = scq,
		.recv_cq = rcq,
		.cap = {.max_send_wr = QP_WRS, .max_recv_wr = QP_WRS, .max_send_sge = 1, .max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
	};
	struct ibv_qp *qp = ibv_create_qp(pd, &a);
	if (!qp)
		die("ibv_create_qp", errno);
	return qp;
}

static void to_init(struct ibv_qp *qp)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = 1, .qp_access_flags = access};
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	if (err)
		die("modify qp to INIT", err);
}

/* connect brings qp to RTS against peer, with rdmatest.ConnectRC's attributes. */
static void connect_qp(struct ibv_qp *qp, struct ibv_qp *peer)
{
	to_init(qp);
	struct ibv_qp_attr a;
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = peer->qp_num;
	a.rq_psn = 100;
	a.max_dest_rd_atomic = 4;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.port_num = 1;
	a.ah_attr.grh.dgid = gid;
	a.ah_attr.grh.sgid_index = 1;
	a.ah_attr.grh.hop_limit = 64;
	int err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
					    IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
	if (err)
		die("modify qp to RTR", err);
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 100;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 4;
	err = ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
					    IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	if (err)
		die("modify qp to RTS", err);
}

static void setup(const char *name)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	if (!list)
		die("ibv_get_device_list", errno);
	for (int i = 0; i < n && !ctx; i++)
		if (!strcmp(ibv_get_device_name(list[i]), name))
			ctx = ibv_open_device(list[i]);
	ibv_free_device_list(list);
	if (!ctx)
		die(name, ENODEV);
	if (ibv_query_gid(ctx, 1, 1, &gid))
		die("ibv_query_gid", errno);
	if (!(pd = ibv_alloc_pd(ctx)))
		die("ibv_alloc_pd", errno);
	if (!(ch = ibv_create_comp_channel(ctx)))
		die("ibv_create_comp_channel", errno);
	if (!(scq = ibv_create_cq(ctx, CQ_SIZE, NULL, ch, 0)) || !(rcq = ibv_create_cq(ctx, CQ_SIZE, NULL, ch, 0)))
		die("ibv_create_cq", errno);
	qa = new_qp();
	qb = new_qp();
	connect_qp(qa, qb);
	connect_qp(qb, qa);
	if (posix_memalign((void **)&buf, 4096, BUF_SIZE))
		die("posix_memalign", ENOMEM);
	memset(buf, 0, BUF_SIZE);
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	if (!(mr = ibv_reg_mr(pd, buf, BUF_SIZE, access)))
		die("ibv_reg_mr", errno);
}

/* writes fills n linked, signaled 8-byte RDMA writes, as env.write does. */
static void writes(struct ibv_send_wr *wrs, struct ibv_sge *sges, int n)
{
	for (int i = 0; i < n; i++) {
		sges[i] = (struct ibv_sge){.addr = (uintptr_t)buf, .length = 8, .lkey = mr->lkey};
		wrs[i] = (struct ibv_send_wr){
			.wr_id = i,
			.sg_list = &sges[i],
			.num_sge = 1,
			.opcode = IBV_WR_RDMA_WRITE,
			.send_flags = IBV_SEND_SIGNALED,
			.wr.rdma = {.remote_addr = (uintptr_t)buf + 4096, .rkey = mr->rkey},
			.next = i + 1 < n ? &wrs[i + 1] : NULL,
		};
	}
}

static void post_send(struct ibv_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(qp, wr, &bad);
	if (err)
		die("ibv_post_send", err);
}

static void reap(struct ibv_cq *cq, int n)
{
	struct ibv_wc wc[64];
	for (int got = 0; got < n;) {
		int k = ibv_poll_cq(cq, n - got < 64 ? n - got : 64, wc);
		if (k < 0)
			die("ibv_poll_cq", -k);
		for (int i = 0; i < k; i++)
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "cbench: completion: %s\n", ibv_wc_status_str(wc[i].status));
				exit(1);
			}
		got += k;
	}
}

static void report(const char *name, long iters, double value, const char *unit)
{
	printf("cbench %s %ld %.4g %s\n", name, iters, value, unit);
	fflush(stdout);
}

/*
 * timed runs fn(n) for n = 1, then for as many iterations as its rate
 * predicts for TARGET_NS (at most 100 times more each round, as b.Loop
 * grows), until one run lasts at least TARGET_NS, and reports ns per
 * iteration in unit.
 */
static void timed(const char *name, double (*fn)(long), const char *unit)
{
	long n = 1;
	for (;;) {
		double t = fn(n);
		if (t >= TARGET_NS || n >= 1000000000L) {
			report(name, n, t / (double)n, unit);
			return;
		}
		double want = t > 0 ? TARGET_NS * 1.2 * (double)n / t : (double)n * 100;
		long next = (long)want;
		if (next > n * 100)
			next = n * 100;
		if (next <= n)
			next = n + 1;
		n = next;
	}
}

static struct ibv_wc wcs[64];

static double poll_empty(long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++)
		ibv_poll_cq(scq, 16, wcs);
	return now_ns() - t0;
}

static double req_notify(long n)
{
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		int err = ibv_req_notify_cq(scq, 0);
		if (err)
			die("ibv_req_notify_cq", err);
	}
	return now_ns() - t0;
}

/*
 * Poll per CQE: post 256 signaled writes, let loopback rxe finish them
 * outside the timer (waiting busy, as the Go benchmark does), then drain
 * the CQ in batches inside it. A round in which a poll found the CQ empty
 * waited for rxe, not for the poll: it is left out of the figure and the
 * next round waits longer.
 */
static void poll_drain(int batch)
{
	char name[64];
	snprintf(name, sizeof(name), "PollDrain/batch=%d", batch);
	struct ibv_send_wr wrs[256];
	struct ibv_sge sges[256];
	writes(wrs, sges, 256);
	double took = 0;
	long cqes = 0, rounds = 0, dirty = 0;
	double settle = 2e6; /* ns */
	post_send(qa, wrs); /* a round outside the figures first, as in Go */
	reap(scq, 256);
	while (took < TARGET_NS && rounds < 500) {
		post_send(qa, wrs);
		for (double t = now_ns(); now_ns() - t < settle;)
			;
		int empty = 0;
		double t0 = now_ns();
		for (int got = 0; got < 256;) {
			int k = ibv_poll_cq(scq, batch, wcs);
			if (k < 0)
				die("ibv_poll_cq", -k);
			if (k == 0)
				empty = 1;
			got += k;
		}
		double t = now_ns() - t0;
		rounds++;
		if (empty) {
			dirty++;
			if (settle < 64e6)
				settle *= 2;
			continue;
		}
		took += t;
		cqes += 256;
	}
	report(name, rounds, cqes ? took / (double)cqes : 0, "ns/CQE");
	if (dirty)
		fprintf(stderr, "cbench: %s: %ld of %ld rounds found the CQ empty and were left out\n", name, dirty, rounds);
}

static double event_round_trip(long n)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	writes(&wr, &sge, 1);
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		int err = ibv_req_notify_cq(scq, 0);
		if (err)
			die("ibv_req_notify_cq", err);
		post_send(qa, &wr);
		struct ibv_cq *ev;
		void *evctx;
		if (ibv_get_cq_event(ch, &ev, &evctx))
			die("ibv_get_cq_event", errno);
		ibv_ack_cq_events(ev, 1);
		int k;
		while ((k = ibv_poll_cq(ev, 4, wcs)) == 0)
			;
		if (k < 0)
			die("ibv_poll_cq", -k);
	}
	return now_ns() - t0;
}

/* A latency tool's step: post one signaled write, poll until its
 * completion. */
static double post_poll(long n)
{
	struct ibv_send_wr wr;
	struct ibv_sge sge;
	writes(&wr, &sge, 1);
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		post_send(qa, &wr);
		int k;
		while ((k = ibv_poll_cq(scq, 1, wcs)) == 0)
			;
		if (k < 0)
			die("ibv_poll_cq", -k);
	}
	return now_ns() - t0;
}

/* PostSend per work request: batches of 32 (one doorbell each), reaped
 * outside the timer. */
static void post_send_bench(void)
{
	struct ibv_send_wr wrs[32];
	struct ibv_sge sges[32];
	writes(wrs, sges, 32);
	double took = 0;
	long posted = 0, rounds = 0;
	while (took < TARGET_NS && rounds < 100000) {
		double t0 = now_ns();
		post_send(qa, wrs);
		took += now_ns() - t0;
		posted += 32;
		rounds++;
		reap(scq, 32);
	}
	report("PostSend", rounds, took / (double)posted, "ns/WR");
}

static long recv_posted;

/* PostRecv per work request: no system call. A fresh QP every 1000 posts,
 * moved to INIT (rdma-core refuses receives in RESET), outside the timer,
 * keeps the receive queue from filling. */
static double post_recv(long n)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf + 8192, .length = 64, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
	double took = 0, t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (recv_posted == 1000) {
			took += now_ns() - t0;
			if (ibv_destroy_qp(qb))
				die("ibv_destroy_qp", errno);
			qb = new_qp();
			to_init(qb);
			recv_posted = 0;
			t0 = now_ns();
		}
		int err = ibv_post_recv(qb, &wr, &bad);
		if (err)
			die("ibv_post_recv", err);
		recv_posted++;
	}
	return took + now_ns() - t0;
}

static struct ibv_srq *srq;
static long srq_posted;

static struct ibv_srq *new_srq(void)
{
	struct ibv_srq_init_attr a = {.attr = {.max_wr = QP_WRS, .max_sge = 1}};
	struct ibv_srq *s = ibv_create_srq(pd, &a);
	if (!s)
		die("ibv_create_srq", errno);
	return s;
}

/* PostSRQRecv per work request, as post_recv: no reset drains an SRQ, so a
 * fresh one every 1000 posts, outside the timer, keeps it from filling. */
static double post_srq_recv(long n)
{
	struct ibv_sge sge = {.addr = (uintptr_t)buf + 8192, .length = 64, .lkey = mr->lkey};
	struct ibv_recv_wr wr = {.sg_list = &sge, .num_sge = 1}, *bad;
	double took = 0, t0 = now_ns();
	for (long i = 0; i < n; i++) {
		if (srq_posted == 1000) {
			took += now_ns() - t0;
			if (ibv_destroy_srq(srq))
				die("ibv_destroy_srq", errno);
			srq = new_srq();
			srq_posted = 0;
			t0 = now_ns();
		}
		int err = ibv_post_srq_recv(srq, &wr, &bad);
		if (err)
			die("ibv_post_srq_recv", err);
		srq_posted++;
	}
	return took + now_ns() - t0;
}

/* A grant and its revocation: register 4 KiB (ibv_reg_mr), deregister it. */
static double reg_dereg(long n)
{
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC;
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		struct ibv_mr *m = ibv_reg_mr(pd, buf + 8192, 4096, access);
		if (!m)
			die("ibv_reg_mr", errno);
		int err = ibv_dereg_mr(m);
		if (err)
			die("ibv_dereg_mr", err);
	}
	return now_ns() - t0;
}

/* The same with a type-2 window: bind 4 KiB, then invalidate, each signaled
 * and reaped. rdma-core 44's rxe provider puts mw->rkey in the bind as the
 * window's current key but does not update it: the caller does. */
static struct ibv_mr *bind_mr;
static struct ibv_mw *mw;
static uint32_t mw_key;

static double bind_invalidate(long n)
{
	struct ibv_send_wr bind = {
		.opcode = IBV_WR_BIND_MW,
		.send_flags = IBV_SEND_SIGNALED,
		.bind_mw = {.mw = mw, .bind_info = {.mr = bind_mr, .addr = (uintptr_t)buf + 8192, .length = 4096,
						  .mw_access_flags = IBV_ACCESS_REMOTE_WRITE}},
	};
	struct ibv_send_wr inv = {.opcode = IBV_WR_LOCAL_INV, .send_flags = IBV_SEND_SIGNALED};
	double t0 = now_ns();
	for (long i = 0; i < n; i++) {
		mw_key = ibv_inc_rkey(mw_key);
		bind.bind_mw.rkey = mw_key;
		post_send(qa, &bind);
		mw->rkey = mw_key;
		reap(scq, 1);
		inv.invalidate_rkey = mw_key;
		post_send(qa, &inv);
		reap(scq, 1);
	}
	return now_ns() - t0;
}

int main(int argc, char **argv)
{
	setup(argc > 1 ? argv[1] : "rxe0");
	timed("PollEmpty", poll_empty, "ns/op");
	poll_drain(1);
	poll_drain(16);
	poll_drain(64);
	timed("ReqNotify", req_notify, "ns/op");
	timed("EventRoundTrip", event_round_trip, "ns/op");
	timed("PostPoll", post_poll, "ns/op");
	post_send_bench();
	timed("PostRecv", post_recv, "ns/WR"); /* the QP swaps left out */
	srq = new_srq();
	timed("PostSRQRecv", post_srq_recv, "ns/WR"); /* the SRQ swaps left out */
	timed("RegDereg", reg_dereg, "ns/op");
	if (!(bind_mr = ibv_reg_mr(pd, buf + 8192, 4096, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND)))
		die("ibv_reg_mr", errno);
	if (!(mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2)))
		die("ibv_alloc_mw", errno);
	mw_key = mw->rkey;
	timed("BindInvalidate", bind_invalidate, "ns/op");
	return 0;
}
