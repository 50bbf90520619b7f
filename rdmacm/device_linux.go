package rdmacm

import (
	"fmt"
	"sync"
	"syscall"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/ucma"
	"github.com/goverbs/goverbs/uverbs"
)

// device is one RDMA device as the package shares it: one uverbs.Context
// and PD per device per process, as librdmacm keeps them, counted by the
// IDs that use it and closed with the last.
type device struct {
	key  devKey
	name string
	ctx  *uverbs.Context
	pd   *uverbs.PD
	// maxResp and maxInit are the device's limits on a QP's RDMA reads
	// and atomics in flight, as target and as initiator.
	maxResp, maxInit uint8
	refs             int // guarded by devices.mu
}

// devKey names a device as the rdma_cm reports it: RDMA netlink's index
// (0 where the kernel does not report it) and the node GUID. A device
// deleted and made again gets a new index.
type devKey struct {
	index uint32
	guid  uint64
}

var devices struct {
	mu sync.Mutex
	m  map[devKey]*device
}

// acquireDevice returns the shared device that a is bound to, opening it
// on first use.
func acquireDevice(a ucma.AddrInfo) (*device, error) {
	if a.NodeGUID == 0 {
		return nil, fmt.Errorf("the ID is bound to no RDMA device yet: %w", syscall.ENODEV)
	}
	key := devKey{guid: a.NodeGUID}
	if a.HaveIBDevIndex {
		key.index = a.IBDevIndex
	}
	devices.mu.Lock()
	defer devices.mu.Unlock()
	if d := devices.m[key]; d != nil {
		d.refs++
		return d, nil
	}
	name, err := deviceName(key)
	if err != nil {
		return nil, err
	}
	ctx, err := uverbs.Open(name)
	if err != nil {
		return nil, err
	}
	if g := uint64(ctx.Device().NodeGUID); g != key.guid {
		ctx.Close()
		return nil, fmt.Errorf("device %s has node GUID %#x, the rdma_cm's has %#x: %w", name, g, key.guid, syscall.ENODEV)
	}
	attr, err := ctx.QueryDevice()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	pd, err := ctx.AllocPD()
	if err != nil {
		ctx.Close()
		return nil, err
	}
	d := &device{key: key, name: name, ctx: ctx, pd: pd, refs: 1,
		maxResp: uint8(min(attr.MaxQPRdAtom, 255)), maxInit: uint8(min(attr.MaxQPInitRdAtom, 255))}
	if devices.m == nil {
		devices.m = map[devKey]*device{}
	}
	devices.m[key] = d
	return d, nil
}

// deviceName finds the ibdev name of key through RDMA netlink.
func deviceName(key devKey) (string, error) {
	devs, err := netlink.RDMADevices()
	if err != nil {
		return "", err
	}
	for _, d := range devs {
		if d.NodeGUID == key.guid && (key.index == 0 || d.Index == key.index) {
			return d.Name, nil
		}
	}
	return "", fmt.Errorf("no RDMA device with index %d and node GUID %#x: %w", key.index, key.guid, syscall.ENODEV)
}

// release gives back one reference; the last closes the PD and Context.
// MRs and QPs still on the PD end with the Context.
func (d *device) release() {
	devices.mu.Lock()
	d.refs--
	last := d.refs == 0
	if last {
		delete(devices.m, d.key)
	}
	devices.mu.Unlock()
	if last {
		_ = d.pd.Close() // EBUSY while the user's MRs remain: the Context's close ends them
		_ = d.ctx.Close()
	}
}
