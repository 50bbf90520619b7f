// mwpeer: the C side of goverbs' memory-window interop test
// (test/interop/mwpeer_linux_test.go), written against rdma-core's
// libibverbs and run in the VM beside goverbs on the same rxe device.
// No rdma-core program binds memory windows, so this one does, with
// rdma-core's own verbs and provider; the VM harness compiles it with the
// host's gcc against the guest's libibverbs, as it does cbench.c.
//
//	mwpeer owner|peer DEVICE GID_INDEX
//
// It talks to the test over stdin and stdout, one line a step:
//
//	both:  prints "qp QPN PSN GID", reads the same of the test, connects.
//	owner: binds a type-2 window on 4 KiB of its buffer to its QP, prints
//	       "window ADDR RKEY"; reads "written" and checks the test's bytes;
//	       posts a receive, prints "ready"; takes the test's send with
//	       invalidate (checks the flag and the key), prints "invalidated";
//	       reads "tried" and checks that its buffer did not change since.
//	peer:  reads "window ADDR RKEY" (the test's window), writes 24 bytes
//	       through it, prints "written"; reads "ready", sends with
//	       invalidate of the key, prints "sent"; reads "again", writes
//	       through the key once more and prints the status it got.
//
// Every failure is one line on stderr and exit status 1.
#include <infiniband/verbs.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BUF 16384
#define PSN 0x2a2a

static struct ibv_context *ctx;
static struct ibv_pd *pd;
static struct ibv_cq *cq;
static struct ibv_qp *qp;
static struct ibv_mr *mr;
static unsigned char *buf;
static int gidx;

static void die(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "mwpeer: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(1);
}

static void say(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	printf("\n");
	fflush(stdout);
	va_end(ap);
}

// hear reads the next line, which must start with word; it returns the
// rest.
static char line[256];
static const char *hear(const char *word)
{
	size_t n = strlen(word);
	if (!fgets(line, sizeof(line), stdin))
		die("waiting for \"%s\": end of input", word);
	line[strcspn(line, "\n")] = 0;
	if (strncmp(line, word, n) != 0 || (line[n] != 0 && line[n] != ' '))
		die("waiting for \"%s\": got \"%s\"", word, line);
	return line + n;
}

static struct ibv_wc poll1(void)
{
	struct ibv_wc wc;
	for (long spins = 0;; spins++) {
		int n = ibv_poll_cq(cq, 1, &wc);
		if (n < 0)
			die("poll cq: %d", n);
		if (n == 1)
			return wc;
		if (spins > 2000000000L)
			die("no completion");
	}
}

static void modify(struct ibv_qp_attr *a, int mask, const char *to)
{
	int err = ibv_modify_qp(qp, a, mask);
	if (err)
		die("modify qp to %s: %s", to, strerror(err));
}

static void setup(const char *devname)
{
	int n;
	struct ibv_device **list = ibv_get_device_list(&n);
	for (int i = 0; list && i < n; i++)
		if (strcmp(ibv_get_device_name(list[i]), devname) == 0)
			ctx = ibv_open_device(list[i]);
	if (!ctx)
		die("open %s", devname);
	if (!(pd = ibv_alloc_pd(ctx)))
		die("alloc pd");
	if (!(cq = ibv_create_cq(ctx, 16, NULL, NULL, 0)))
		die("create cq");
	if (posix_memalign((void **)&buf, 4096, BUF))
		die("memalign");
	for (int i = 0; i < BUF; i++)
		buf[i] = (unsigned char)(i * 13);
	mr = ibv_reg_mr(pd, buf, BUF, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_MW_BIND);
	if (!mr)
		die("reg mr");
	struct ibv_qp_init_attr ia = {
		.send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
		.cap = {.max_send_wr = 8, .max_recv_wr = 8, .max_send_sge = 1, .max_recv_sge = 1},
	};
	if (!(qp = ibv_create_qp(pd, &ia)))
		die("create qp");

	union ibv_gid gid;
	if (ibv_query_gid(ctx, 1, gidx, &gid))
		die("query gid %d", gidx);
	char hex[33];
	for (int i = 0; i < 16; i++)
		sprintf(hex + 2 * i, "%02x", gid.raw[i]);
	say("qp %u %u %s", qp->qp_num, PSN, hex);

	unsigned rqpn, rpsn;
	char rhex[33];
	if (sscanf(hear("qp"), " %u %u %32s", &rqpn, &rpsn, rhex) != 3)
		die("bad qp line \"%s\"", line);
	union ibv_gid rgid;
	for (int i = 0; i < 16; i++)
		if (sscanf(rhex + 2 * i, "%2hhx", &rgid.raw[i]) != 1)
			die("bad gid %s", rhex);

	struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .port_num = 1,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ};
	modify(&a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = IBV_MTU_1024;
	a.dest_qp_num = rqpn;
	a.rq_psn = rpsn;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 12;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = rgid;
	a.ah_attr.grh.sgid_index = gidx;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	modify(&a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
		       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER, "RTR");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTS;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.sq_psn = PSN;
	a.max_rd_atomic = 1;
	modify(&a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
		       IBV_QP_MAX_QP_RD_ATOMIC, "RTS");
}

static void post(struct ibv_send_wr *wr, const char *what)
{
	struct ibv_send_wr *bad;
	int err = ibv_post_send(qp, wr, &bad);
	if (err)
		die("post %s: %s", what, strerror(err));
}

static uint32_t sum(const unsigned char *p, size_t n)
{
	uint32_t h = 2166136261u;
	for (size_t i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

static const char msg[] = "written through a window"; // 24 bytes

static void owner(void)
{
	struct ibv_mw *mw = ibv_alloc_mw(pd, IBV_MW_TYPE_2);
	if (!mw)
		die("alloc mw");
	uint64_t addr = (uintptr_t)buf + 4096;
	struct ibv_send_wr wr = {.wr_id = 1, .opcode = IBV_WR_BIND_MW, .send_flags = IBV_SEND_SIGNALED};
	wr.bind_mw.mw = mw;
	wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
	wr.bind_mw.bind_info.mr = mr;
	wr.bind_mw.bind_info.addr = addr;
	wr.bind_mw.bind_info.length = 4096;
	wr.bind_mw.bind_info.mw_access_flags = IBV_ACCESS_REMOTE_WRITE;
	post(&wr, "bind mw");
	struct ibv_wc wc = poll1();
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_BIND_MW)
		die("bind: status %s, opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	// rdma-core 44 leaves mw->rkey as it was after a type-2 bind: the
	// new key is the one the request carried.
	uint32_t rkey = wr.bind_mw.rkey;
	say("window %" PRIu64 " %u", addr, rkey);

	hear("written");
	if (memcmp(buf + 4096 + 100, msg, 24) != 0)
		die("the test wrote \"%.24s\"", buf + 4096 + 100);

	struct ibv_sge sge = {.addr = (uintptr_t)buf + 12288, .length = 64, .lkey = mr->lkey};
	struct ibv_recv_wr rwr = {.wr_id = 2, .sg_list = &sge, .num_sge = 1}, *rbad;
	if (ibv_post_recv(qp, &rwr, &rbad))
		die("post recv");
	say("ready");
	wc = poll1();
	// rxe's kernel reports the invalidation with its own flag bit
	// (IB_WC_WITH_INVALIDATE, 4), which rdma-core 44 passes on as it is.
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV || !(wc.wc_flags & (IBV_WC_WITH_INV | 4)) ||
	    wc.invalidated_rkey != rkey)
		die("receive: status %s, opcode %d, flags %#x, invalidated rkey %#x (the window's %#x)",
		    ibv_wc_status_str(wc.status), wc.opcode, wc.wc_flags, wc.invalidated_rkey, rkey);
	uint32_t before = sum(buf, BUF);
	say("invalidated");

	hear("tried");
	if (sum(buf, BUF) != before)
		die("the buffer changed after the window was invalidated");
	say("unchanged");
	if (ibv_dealloc_mw(mw))
		die("dealloc mw");
}

static void peer(void)
{
	uint64_t addr;
	uint32_t rkey;
	if (sscanf(hear("window"), " %" SCNu64 " %u", &addr, &rkey) != 2)
		die("bad window line \"%s\"", line);
	memcpy(buf, msg, 24);
	struct ibv_sge sge = {.addr = (uintptr_t)buf, .length = 24, .lkey = mr->lkey};
	struct ibv_send_wr wr = {.wr_id = 1, .opcode = IBV_WR_RDMA_WRITE, .send_flags = IBV_SEND_SIGNALED,
				 .sg_list = &sge, .num_sge = 1};
	wr.wr.rdma.remote_addr = addr + 100;
	wr.wr.rdma.rkey = rkey;
	post(&wr, "rdma write");
	struct ibv_wc wc = poll1();
	if (wc.status != IBV_WC_SUCCESS)
		die("write through the window: %s", ibv_wc_status_str(wc.status));
	say("written");

	hear("ready");
	sge.length = 8;
	struct ibv_send_wr inv = {.wr_id = 2, .opcode = IBV_WR_SEND_WITH_INV, .send_flags = IBV_SEND_SIGNALED,
				  .sg_list = &sge, .num_sge = 1, .invalidate_rkey = rkey};
	post(&inv, "send with invalidate");
	wc = poll1();
	if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_SEND)
		die("send with invalidate: status %s, opcode %d", ibv_wc_status_str(wc.status), wc.opcode);
	say("sent");

	hear("again");
	sge.length = 24;
	post(&wr, "rdma write");
	wc = poll1();
	say("status %s", ibv_wc_status_str(wc.status));
}

int main(int argc, char **argv)
{
	if (argc != 4 || (strcmp(argv[1], "owner") != 0 && strcmp(argv[1], "peer") != 0))
		die("usage: mwpeer owner|peer DEVICE GID_INDEX");
	gidx = atoi(argv[3]);
	setup(argv[2]);
	if (strcmp(argv[1], "owner") == 0)
		owner();
	else
		peer();
	return 0;
}
