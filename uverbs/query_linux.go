package uverbs

import (
	"encoding/binary"
	"fmt"
	"math"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/uapi"
)

// clampCount turns a kernel u32 count into an int, saturating where int is 32 bits.
func clampCount(v uint32) int {
	if uint64(v) > math.MaxInt {
		return math.MaxInt
	}
	return int(v)
}

// QueryDevice returns the device's attributes (ibv_query_device_ex, which
// includes ibv_query_device's): the extended write command
// EX_QUERY_DEVICE, falling back to QUERY_DEVICE where the kernel lacks it.
func (c *Context) QueryDevice() (DeviceAttr, error) {
	const op = "query device"
	if err := c.use(op); err != nil {
		return DeviceAttr{}, err
	}
	defer c.done()
	r, err := kverbs.QueryDevice(c.conn)
	if err != nil {
		return DeviceAttr{}, c.opErr(op, err)
	}
	return deviceAttr(&r, c.dev.DriverID), nil
}

// deviceAttr converts the kernel's answer.
func deviceAttr(r *uapi.IBUverbsExQueryDeviceResp, driver uint32) DeviceAttr {
	b := &r.Base
	a := DeviceAttr{
		FWVersion:    fwVersion(b.FwVer, driver),
		FWVer:        b.FwVer,
		NodeGUID:     GUID(fromBE64(b.NodeGuid)),
		SysImageGUID: GUID(fromBE64(b.SysImageGuid)),
		MaxMRSize:    b.MaxMRSize,
		PageSizeCap:  b.PageSizeCap,
		VendorID:     b.VendorID,
		VendorPartID: b.VendorPartID,
		HWVer:        b.HwVer,

		MaxQP:       clampCount(b.MaxQP),
		MaxQPWR:     clampCount(b.MaxQPWR),
		MaxSGE:      clampCount(b.MaxSGE),
		MaxSGERd:    clampCount(b.MaxSGERd),
		MaxCQ:       clampCount(b.MaxCQ),
		MaxCQE:      clampCount(b.MaxCQE),
		MaxMR:       clampCount(b.MaxMR),
		MaxPD:       clampCount(b.MaxPD),
		MaxMW:       clampCount(b.MaxMW),
		MaxAH:       clampCount(b.MaxAH),
		MaxSRQ:      clampCount(b.MaxSRQ),
		MaxSRQWR:    clampCount(b.MaxSRQWR),
		MaxSRQSGE:   clampCount(b.MaxSRQSGE),
		MaxPkeys:    int(b.MaxPkeys),
		PhysPortCnt: int(b.PhysPortCnt),

		MaxQPRdAtom:           clampCount(b.MaxQPRdAtom),
		MaxResRdAtom:          clampCount(b.MaxResRdAtom),
		MaxQPInitRdAtom:       clampCount(b.MaxQPInitRdAtom),
		AtomicCap:             AtomicCap(b.AtomicCap),
		MaxMcastGrp:           clampCount(b.MaxMcastGrp),
		MaxMcastQPAttach:      clampCount(b.MaxMcastQPAttach),
		MaxTotalMcastQPAttach: clampCount(b.MaxTotalMcastQPAttach),
		LocalCAAckDelay:       b.LocalCaAckDelay,
		MaxRawIPv6QP:          clampCount(b.MaxRawIpv6QP),
		MaxRawEthernetQP:      clampCount(b.MaxRawEthyQP),
		DeviceCapFlags:        DeviceCap(b.DeviceCapFlags),
		DeviceCapFlagsEx:      DeviceCap(r.DeviceCapFlagsEx),
		RawPacketCapFlags:     RawPacketCap(r.RawPacketCaps),

		CompletionTimestampMask: r.TimestampMask,
		HCACoreClock:            r.HcaCoreClock,
		MaxDMSize:               r.MaxDMSize,
		MaxWQTypeRQ:             clampCount(r.MaxWQTypeRq),
		ODPCaps: ODPCaps{
			GeneralCaps: r.OdpCaps.GeneralCaps,
			RC:          r.OdpCaps.PerTransportCaps.RcOdpCaps,
			UC:          r.OdpCaps.PerTransportCaps.UcOdpCaps,
			UD:          r.OdpCaps.PerTransportCaps.UdOdpCaps,
			XRC:         r.XrcOdpCaps,
		},
	}
	a.CQModeration.MaxCount = r.CQModerationCaps.MaxCQModerationCount
	a.CQModeration.MaxPeriod = r.CQModerationCaps.MaxCQModerationPeriod
	return a
}

// fromBE64 returns the value of a __be64 field that was read as a host u64.
func fromBE64(v uint64) uint64 {
	var b [8]byte
	binary.NativeEndian.PutUint64(b[:], v)
	return binary.BigEndian.Uint64(b[:])
}

// fwVersion formats fw_ver as the device's provider does (its rdma-core
// twin's ibv_query_device); a driver goverbs has no provider for gets
// "%d.%d.%d", the form most rdma-core providers print.
func fwVersion(v uint64, driver uint32) string {
	if drv, ok := provider.Lookup(driver); ok {
		return drv.FWVersion(v)
	}
	return fmt.Sprintf("%d.%d.%d", (v>>32)&0xffff, (v>>16)&0xffff, v&0xffff)
}

// checkPort validates a port number before it reaches the kernel as a u8.
func checkPort(port int) error {
	if port < 1 || port > math.MaxUint8 {
		return fmt.Errorf("port %d out of range [1, %d]: %w", port, math.MaxUint8, unix.EINVAL)
	}
	return nil
}

// QueryPort returns the attributes of port, numbered from 1
// (ibv_query_port): the QUERY_PORT ioctl, or the legacy write command
// where the kernel lacks it. A port the device does not have gives an
// error wrapping EINVAL.
func (c *Context) QueryPort(port int) (PortAttr, error) {
	const op = "query port"
	if err := checkPort(port); err != nil {
		return PortAttr{}, c.opErr(op, err)
	}
	if err := c.use(op); err != nil {
		return PortAttr{}, err
	}
	defer c.done()
	return c.queryPort(op, port)
}

// queryPort is QueryPort for callers that hold the context (c.use).
func (c *Context) queryPort(op string, port int) (PortAttr, error) {
	r, err := kverbs.QueryPort(c.conn, uint8(port))
	if err != nil {
		return PortAttr{}, c.opErr(op, fmt.Errorf("port %d: %w", port, err))
	}
	return portAttr(&r), nil
}

// portAttr converts the kernel's answer.
func portAttr(r *uapi.IBUverbsQueryPortRespEx) PortAttr {
	l := &r.LegacyResp
	a := PortAttr{
		State:         PortState(l.State),
		MaxMTU:        MTU(l.MaxMTU),
		ActiveMTU:     MTU(l.ActiveMTU),
		GIDTblLen:     clampCount(l.GIDTblLen),
		PortCapFlags:  PortCap(l.PortCapFlags),
		PortCapFlags2: r.PortCapFlags2,
		MaxMsgSz:      l.MaxMsgSz,
		BadPkeyCntr:   l.BadPkeyCntr,
		QkeyViolCntr:  l.QkeyViolCntr,
		PkeyTblLen:    int(l.PkeyTblLen),
		LID:           l.LID,
		SMLID:         l.SmLID,
		LMC:           l.Lmc,
		MaxVLNum:      l.MaxVlNum,
		SMSL:          l.SmSl,
		SubnetTimeout: l.SubnetTimeout,
		InitTypeReply: l.InitTypeReply,
		ActiveWidth:   Width(l.ActiveWidth),
		ActiveSpeed:   Speed(l.ActiveSpeed),
		PhysState:     PhysState(l.PhysState),
		LinkLayer:     LinkLayer(l.LinkLayer),
		GRHRequired:   l.Flags&uapi.IB_UVERBS_QPF_GRH_REQUIRED != 0,
	}
	// Kernels from 6.7 put __u32 active_speed_ex after port_cap_flags2
	// and two reserved bytes, where the 6.1 header has reserved[6]; older
	// ones leave it zero.
	if ex := binary.NativeEndian.Uint32(r.Reserved[2:6]); ex != 0 {
		a.ActiveSpeed = Speed(ex)
	}
	return a
}
