package mlx5

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

func init() { provider.Register(uapi.RDMA_DRIVER_MLX5, driver{}) }

// driver is the mlx5 provider (ConnectX-4 and later), registered for
// RDMA_DRIVER_MLX5.
type driver struct{}

// Name returns "mlx5".
func (driver) Name() string { return "mlx5" }

// FWVersion formats fw_ver as rdma-core's mlx5 provider does
// (providers/mlx5/verbs.c, mlx5_query_device_ex: "%d.%d.%04d", the sub-minor padded to four
// digits: "16.35.2000", "22.31.0100").
func (driver) FWVersion(v uint64) string {
	return fmt.Sprintf("%d.%d.%04d", (v>>32)&0xffff, (v>>16)&0xffff, v&0xffff)
}

// What GET_CONTEXT asks for without dynamic UARs, as rdma-core does.
const (
	staticBfregs  = 16
	staticLowLat  = 4
	maxCQEVersion = 1
	legacyUIDX    = 0xffffff // cqe_version 0: CQEs name the QP by QPN
)

// Open creates the ucontext with the mlx5 driver data, asking for dynamic
// UARs (kernel ≥ 5.8) and falling back to the static UARs a kernel maps
// at context creation; then maps the UAR that takes CQ arm doorbells.
func (driver) Open(conn *transport.Conn, fd int) (provider.Context, kverbs.Context, error) {
	// A GOARCH with no device barriers that goverbs can stand behind
	// (mmio_other.go) gets no ConnectX, rather than a guessed fence.
	if archRefusal != nil {
		return nil, kverbs.Context{AsyncFD: -1}, archRefusal
	}

	c := &context{conn: conn, fd: fd, uars: map[uint32]dmaBuf{}}
	// Static UAR counts go along, as rdma-core sends them: a kernel that
	// grants dynamic UARs ignores them (and answers tot_bfregs 0), one that
	// does not know the capability makes static UARs from them.
	req := uapi.Mlx5IBAllocUcontextReqV2{
		TotalNumBfregs:      staticBfregs,
		NumLowLatencyBfregs: staticLowLat,
		MaxCQEVersion:       maxCQEVersion,
		LibCaps:             uapi.MLX5_LIB_CAP_4K_UAR | uapi.MLX5_LIB_CAP_DYN_UAR,
	}
	mode := os.Getenv(provider.EnvMLX5UAR)
	var kc kverbs.Context
	err := error(unix.EOPNOTSUPP)
	if mode != "static" {
		kc, err = kverbs.GetContext(conn, bytesOf(&req), bytesOf(&c.resp))
	}
	if (errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP)) && mode != "dynamic" {
		// A kernel that refuses the dynamic-UAR request: static UARs.
		req = uapi.Mlx5IBAllocUcontextReqV2{
			TotalNumBfregs:      staticBfregs,
			NumLowLatencyBfregs: staticLowLat,
			MaxCQEVersion:       maxCQEVersion,
			LibCaps:             uapi.MLX5_LIB_CAP_4K_UAR,
		}
		c.resp = uapi.Mlx5IBAllocUcontextResp{}
		kc, err = kverbs.GetContext(conn, bytesOf(&req), bytesOf(&c.resp))
	}
	if err != nil {
		return nil, kc, err
	}
	c.cqeVersion = min(c.resp.CQEVersion, maxCQEVersion)
	c.dynamic = c.resp.TotBfregs == 0 && req.LibCaps&uapi.MLX5_LIB_CAP_DYN_UAR != 0
	if mode == "dynamic" && !c.dynamic {
		c.Close()
		closeAsync(kc)
		return nil, kc, fmt.Errorf("%s=dynamic: the kernel gave static UARs (%d registers): %w", provider.EnvMLX5UAR, c.resp.TotBfregs, unix.EOPNOTSUPP)
	}
	if err := c.mapUARs(); err != nil {
		c.Close()
		closeAsync(kc)
		return nil, kc, err
	}
	return c, kc, nil
}

func closeAsync(kc kverbs.Context) {
	if kc.AsyncFD >= 0 {
		unix.Close(kc.AsyncFD)
	}
}

// context is the provider's side of an open mlx5 device.
type context struct {
	conn       *transport.Conn
	fd         int
	resp       uapi.Mlx5IBAllocUcontextResp
	cqeVersion uint8
	dynamic    bool // dynamic UARs: CQs and QPs name UAR pages we allocated

	// cqUAR takes the CQs' arm doorbells; qpUAR (dynamic UARs) the send
	// doorbells of every QP, all on one half of its first blue-flame
	// register: 8-byte doorbells need no register of their own (QP.ringSend).
	cqUAR, qpUAR uarPage

	mu   sync.Mutex
	uars map[uint32]dmaBuf // guarded by mu: static UAR pages mapped, by index
	dbs  dbPool

	// qps finds a QP from a CQE: by user index (cqe_version 1) or QPN.
	// Poll reads it with one atomic load; creating and destroying QPs
	// replace it.
	qps     atomic.Pointer[map[uint32]*queuePair]
	qpMu    sync.Mutex
	nextIdx uint32                      // guarded by qpMu: the next user index to try
	srqs    map[uint32]*sharedRecvQueue // guarded by qpMu: SRQs by kernel handle, for CreateQP
}

// uarPage is a mapped UAR page and what the kernel calls it.
type uarPage struct {
	mem    dmaBuf // the mapping; nil for a static page owned by uars
	base   unsafe.Pointer
	handle uint32 // dynamic UAR object handle
	pageID uint32
	dyn    bool
}

// mapUARs maps the UAR page for CQ doorbells, and one for QP doorbells:
// two dynamic UARs (non-cached for CQs, blue-flame for QPs), or static
// page 0.
func (c *context) mapUARs() error {
	if !c.dynamic {
		base, err := c.staticPage(0)
		if err != nil {
			return err
		}
		c.cqUAR = uarPage{base: base}
		return nil
	}
	var err error
	if c.cqUAR, err = c.allocUAR(uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_NC); err != nil {
		return fmt.Errorf("mlx5 CQ doorbell page: %w", err)
	}
	if c.qpUAR, err = c.allocUAR(uapi.MLX5_IB_UAPI_UAR_ALLOC_TYPE_BF); err != nil {
		return fmt.Errorf("mlx5 QP doorbell page: %w", err)
	}
	return nil
}

func (c *context) allocUAR(typ uint32) (uarPage, error) {
	u, err := kverbs.AllocUAR(c.conn, typ)
	if err != nil {
		return uarPage{}, fmt.Errorf("alloc UAR: %w", err)
	}
	mem, err := unix.Mmap(c.fd, int64(u.MmapOffset), int(u.MmapLength), unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		kverbs.DestroyUAR(c.conn, u.Handle)
		return uarPage{}, fmt.Errorf("mmap UAR (offset %#x, %d bytes): %w", u.MmapOffset, u.MmapLength, err)
	}
	return uarPage{mem: mem, base: unsafe.Pointer(&mem[0]), handle: u.Handle, pageID: u.PageID, dyn: true}, nil
}

// staticPage maps static UAR page i (once), as the kernel made them at
// context creation.
func (c *context) staticPage(i uint32) (unsafe.Pointer, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if m, ok := c.uars[i]; ok {
		return m.ptr(), nil
	}
	page := unix.Getpagesize()
	off := int64(uapi.MLX5_IB_MMAP_REGULAR_PAGE<<8|i) * int64(page)
	mem, err := unix.Mmap(c.fd, off, page, unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("mmap UAR page %d: %w", i, err)
	}
	c.uars[i] = mem
	return unsafe.Pointer(&mem[0]), nil
}

// Close unmaps the UARs and frees the doorbell pages; the kernel frees
// the rest with the fd.
func (c *context) Close() error {
	for _, u := range []*uarPage{&c.cqUAR, &c.qpUAR} {
		if u.dyn {
			u.mem.free()
			kverbs.DestroyUAR(c.conn, u.handle)
		}
		*u = uarPage{}
	}
	c.mu.Lock()
	for i, m := range c.uars {
		m.free()
		delete(c.uars, i)
	}
	c.mu.Unlock()
	return nil
}

// Release frees the doorbell records, which the device reads until the
// kernel has destroyed the QPs and CQs still open: the caller has closed
// the context's fd.
func (c *context) Release() { c.dbs.release() }

// setQP publishes a QP under key (nil: forgets it).
func (c *context) setQP(key uint32, q *queuePair) {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	m := map[uint32]*queuePair{}
	if old := c.qps.Load(); old != nil {
		for k, v := range *old {
			m[k] = v
		}
	}
	if q == nil {
		delete(m, key)
	} else {
		m[key] = q
	}
	c.qps.Store(&m)
}

// newUIDX picks a user index no live QP has, not reusing one soon, so
// that a stale CQE of a destroyed QP never names a new one.
func (c *context) newUIDX() uint32 {
	c.qpMu.Lock()
	defer c.qpMu.Unlock()
	m := c.qps.Load()
	for {
		i := c.nextIdx % legacyUIDX // legacyUIDX itself means "none"
		c.nextIdx++
		if m == nil || (*m)[i] == nil || (*m)[i].gone {
			return i
		}
	}
}

// bytesOf views a driver struct as bytes, for the kernel to read or fill.
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}
