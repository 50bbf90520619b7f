package rxe

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

func init() { provider.Register(uapi.RDMA_DRIVER_RXE, driver{}) }

// driver is the rxe provider, registered for RDMA_DRIVER_RXE.
type driver struct{}

// Name returns "rxe".
func (driver) Name() string { return "rxe" }

// FWVersion formats fw_ver as rdma-core's rxe provider does
// (providers/rxe/rxe.c: "%d.%d.%d"; rxe reports 0, so "0.0.0").
func (driver) FWVersion(v uint64) string {
	return fmt.Sprintf("%d.%d.%d", (v>>32)&0xffff, (v>>16)&0xffff, v&0xffff)
}

// Open creates the ucontext: rxe takes no driver data for it.
func (driver) Open(conn *transport.Conn, fd int) (provider.Context, kverbs.Context, error) {
	kc, err := kverbs.GetContext(conn, nil, nil)
	if err != nil {
		return nil, kc, err
	}
	c := &context{conn: conn, fd: fd}
	c.ext.conn = conn
	return c, kc, nil
}

type context struct {
	conn *transport.Conn
	fd   int
	ext  extOps
}

func (c *context) Close() error { return nil }

// Release does nothing: rxe's queues are the kernel's memory, mapped.
func (c *context) Release() {}

// addressHandle is an rxe address handle; ah_num indexes the kernel's AV table and
// goes into UD send WQEs (kernel ≥ 5.17; older kernels answer 0 and want
// the AV copied into each WQE).
type addressHandle struct {
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
	return &addressHandle{conn: c.conn, handle: h, num: resp.AHNum}, nil
}

// Handle returns the kernel handle.
func (a *addressHandle) Handle() uint32 { return a.handle }

// Num returns rxe's AH index (0 on kernels before 5.17).
func (a *addressHandle) Num() uint32 { return a.num }

// Destroy destroys the address handle.
func (a *addressHandle) Destroy() error { return kverbs.DestroyAH(a.conn, a.handle) }
