package rxe

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// Driver is the rxe provider.
type Driver struct{}

// Name returns "rxe".
func (Driver) Name() string { return "rxe" }

// Open creates the ucontext: rxe takes no driver data for it.
func (Driver) Open(conn *transport.Conn, fd int) (provider.Context, kverbs.Context, error) {
	kc, err := kverbs.GetContext(conn, nil, nil)
	if err != nil {
		return nil, kc, err
	}
	return &context{conn: conn, fd: fd}, kc, nil
}

type context struct {
	conn *transport.Conn
	fd   int
}

func (c *context) Close() error { return nil }

// CQ is an rxe completion queue. Its ring (rxe_create_cq_resp's mminfo)
// is mapped by the data path.
type CQ struct {
	conn   *transport.Conn
	handle uint32
	size   int
	mi     uapi.Mminfo // where the ring is: mmap offset and size (one-shot)
}

// CreateCQ creates the CQ; rxe answers with the mmap info of its ring.
func (c *context) CreateCQ(r kverbs.CQReq) (provider.CQ, error) {
	var resp uapi.RxeCreateCQResp
	out := bytesOf(&resp)
	k, err := kverbs.CreateCQ(c.conn, r, nil, out)
	if err != nil {
		return nil, err
	}
	if resp.Mi.Size == 0 {
		kverbs.DestroyCQ(c.conn, k.Handle)
		return nil, fmt.Errorf("rxe gave no CQ ring (mminfo %+v)", resp.Mi)
	}
	return &CQ{conn: c.conn, handle: k.Handle, size: int(k.CQE), mi: resp.Mi}, nil
}

// Handle returns the kernel handle.
func (q *CQ) Handle() uint32 { return q.handle }

// Size returns the number of CQEs the CQ holds.
func (q *CQ) Size() int { return q.size }

// Destroy destroys the CQ.
func (q *CQ) Destroy() (kverbs.Events, error) { return kverbs.DestroyCQ(q.conn, q.handle) }

// QP is an rxe queue pair. Its send and receive queues
// (rxe_create_qp_resp's mminfos) are mapped by the data path.
type QP struct {
	conn   *transport.Conn
	k      kverbs.QP
	rq, sq uapi.Mminfo
}

// CreateQP creates the QP; rxe answers with the mmap info of its queues.
func (c *context) CreateQP(r kverbs.QPReq) (provider.QP, error) {
	var resp uapi.RxeCreateQPResp
	k, err := kverbs.CreateQP(c.conn, r, nil, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	return &QP{conn: c.conn, k: k, rq: resp.RqMi, sq: resp.SqMi}, nil
}

// Handle returns the kernel handle.
func (q *QP) Handle() uint32 { return q.k.Handle }

// QPN returns the QP number.
func (q *QP) QPN() uint32 { return q.k.QPN }

// Cap returns the queue sizes the kernel made.
func (q *QP) Cap() kverbs.QPCap { return q.k.Cap }

// Destroy destroys the QP.
func (q *QP) Destroy() (uint32, error) { return kverbs.DestroyQP(q.conn, q.k.Handle) }

// AH is an rxe address handle; ah_num indexes the kernel's AV table and
// goes into UD send WQEs (kernel ≥ 5.17; older kernels answer 0 and want
// the AV copied into each WQE).
type AH struct {
	conn   *transport.Conn
	handle uint32
	num    uint32
}

// CreateAH creates the address handle.
func (c *context) CreateAH(pd uint32, userHandle uint64, attr *provider.AHAttr) (provider.AH, error) {
	var resp uapi.RxeCreateAHResp
	h, err := kverbs.CreateAH(c.conn, pd, userHandle, attr, bytesOf(&resp))
	if err != nil {
		return nil, err
	}
	return &AH{conn: c.conn, handle: h, num: resp.AHNum}, nil
}

// Handle returns the kernel handle.
func (a *AH) Handle() uint32 { return a.handle }

// Num returns rxe's AH index (0 on kernels before 5.17).
func (a *AH) Num() uint32 { return a.num }

// Destroy destroys the address handle.
func (a *AH) Destroy() error { return kverbs.DestroyAH(a.conn, a.handle) }
