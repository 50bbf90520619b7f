package uverbs

import (
	"encoding/binary"
	"fmt"
	"math"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/kverbs"
	"github.com/goverbs/goverbs/uapi"
)

// DeviceAttr holds what a device can do (struct ibv_device_attr_ex), as
// Context.QueryDevice reports it. Limits are counts of objects or work
// requests; fields the kernel did not report are zero.
type DeviceAttr struct {
	// FWVersion is the firmware version the way the provider formats it
	// for ibv_devinfo: "major.minor.sub" ("0.0.0" on rxe); mlx5 pads the
	// last part to four digits ("16.35.2000"). FWVer is the raw value.
	FWVersion    string
	FWVer        uint64
	NodeGUID     GUID
	SysImageGUID GUID
	MaxMRSize    uint64 // bytes one MR may span
	PageSizeCap  uint64 // the page sizes the device supports, as a bit mask
	VendorID     uint32 // IEEE OUI
	VendorPartID uint32
	HWVer        uint32

	MaxQP       int
	MaxQPWR     int // work requests per queue
	MaxSGE      int // scatter/gather entries per work request
	MaxSGERd    int // for RDMA reads
	MaxCQ       int
	MaxCQE      int // entries per CQ
	MaxMR       int
	MaxPD       int
	MaxMW       int
	MaxAH       int
	MaxSRQ      int
	MaxSRQWR    int
	MaxSRQSGE   int
	MaxPkeys    int
	PhysPortCnt int

	MaxQPRdAtom           int // outstanding RDMA reads and atomics a QP may be the target of
	MaxResRdAtom          int // the same for the whole device
	MaxQPInitRdAtom       int // outstanding RDMA reads and atomics a QP may initiate
	AtomicCap             AtomicCap
	MaxMcastGrp           int
	MaxMcastQPAttach      int // QPs per multicast group
	MaxTotalMcastQPAttach int // QP attachments to multicast groups, in all
	LocalCAAckDelay       uint8
	MaxRawIPv6QP          int
	MaxRawEthernetQP      int
	DeviceCapFlags        uint32 // enum ib_uverbs_device_cap_flags, low 32 bits (uapi.IB_UVERBS_DEVICE_*)
	DeviceCapFlagsEx      uint64 // all of them, the high bits included
	RawPacketCapFlags     uint32 // enum ib_uverbs_raw_packet_caps

	// CompletionTimestampMask is the valid bits of a completion's
	// timestamp; 0 if the device does not stamp completions.
	CompletionTimestampMask uint64
	// HCACoreClock is the frequency of the timestamp clock, in kHz; 0 if
	// none.
	HCACoreClock uint64
	// MaxDMSize is how many bytes of device memory may be allocated; 0
	// if none.
	MaxDMSize   uint64
	MaxWQTypeRQ int
	ODPCaps     ODPCaps
	// CQModeration is how far completion events may be coalesced; zero
	// if CQs cannot be moderated.
	CQModeration struct {
		MaxCount  uint16 // completions per event
		MaxPeriod uint16 // microseconds
	}
}

// ODPCaps says which operations work on on-demand-paging memory regions
// (struct ibv_odp_caps).
type ODPCaps struct {
	GeneralCaps uint64 // IBV_ODP_SUPPORT (1), IBV_ODP_SUPPORT_IMPLICIT (2)
	// Per transport: IBV_ODP_SUPPORT_SEND (1), RECV (2), WRITE (4),
	// READ (8), ATOMIC (16), SRQ_RECV (32).
	RC, UC, UD, XRC uint32
}

// AtomicCap is the scope in which a device's atomic operations are atomic
// (enum ibv_atomic_cap).
type AtomicCap uint8

// Atomic capabilities.
const (
	AtomicNone AtomicCap = 0 // no atomics
	AtomicHCA  AtomicCap = 1 // atomic among the operations of this device
	AtomicGlob AtomicCap = 2 // atomic against the CPU and other devices too
)

// String names the capability as ibv_devinfo does: "ATOMIC_HCA".
func (a AtomicCap) String() string {
	switch a {
	case AtomicNone:
		return "ATOMIC_NONE"
	case AtomicHCA:
		return "ATOMIC_HCA"
	case AtomicGlob:
		return "ATOMIC_GLOB"
	}
	return "AtomicCap(" + strconv.Itoa(int(a)) + ")"
}

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
		DeviceCapFlags:        b.DeviceCapFlags,
		DeviceCapFlagsEx:      r.DeviceCapFlagsEx,
		RawPacketCapFlags:     r.RawPacketCaps,

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

// fwVersion formats fw_ver as the driver's rdma-core provider does for
// ibv_query_device: three 16-bit parts, "%d.%d.%d" (rxe and most), or
// "%d.%d.%04d" (mlx5).
func fwVersion(v uint64, driver uint32) string {
	major, minor, sub := (v>>32)&0xffff, (v>>16)&0xffff, v&0xffff
	if driver == uapi.RDMA_DRIVER_MLX5 {
		return fmt.Sprintf("%d.%d.%04d", major, minor, sub)
	}
	return fmt.Sprintf("%d.%d.%d", major, minor, sub)
}

// PortState is the logical state of a port (enum ibv_port_state).
type PortState uint8

// Port states.
const (
	PortNOP         PortState = 0
	PortDown        PortState = 1
	PortInit        PortState = 2
	PortArmed       PortState = 3
	PortActive      PortState = 4
	PortActiveDefer PortState = 5
)

// String names the state as ibv_devinfo prints it: "PORT_ACTIVE".
// (libibverbs' ibv_port_state_str has another spelling: "active".)
func (s PortState) String() string {
	switch s {
	case PortNOP:
		return "PORT_NOP"
	case PortDown:
		return "PORT_DOWN"
	case PortInit:
		return "PORT_INIT"
	case PortArmed:
		return "PORT_ARMED"
	case PortActive:
		return "PORT_ACTIVE"
	case PortActiveDefer:
		return "PORT_ACTIVE_DEFER"
	}
	return "PortState(" + strconv.Itoa(int(s)) + ")"
}

// PhysState is the physical state of a port's link (the PortPhysicalState
// of the InfiniBand PortInfo).
type PhysState uint8

// Physical port states.
const (
	PhysSleep             PhysState = 1
	PhysPolling           PhysState = 2
	PhysDisabled          PhysState = 3
	PhysTraining          PhysState = 4
	PhysLinkUp            PhysState = 5
	PhysLinkErrorRecovery PhysState = 6
	PhysTest              PhysState = 7
)

// String names the state as ibv_devinfo prints it: "LINK_UP".
func (s PhysState) String() string {
	switch s {
	case PhysSleep:
		return "SLEEP"
	case PhysPolling:
		return "POLLING"
	case PhysDisabled:
		return "DISABLED"
	case PhysTraining:
		return "PORT_CONFIGURATION TRAINNING" // sic, as ibv_devinfo spells it
	case PhysLinkUp:
		return "LINK_UP"
	case PhysLinkErrorRecovery:
		return "LINK_ERROR_RECOVERY"
	case PhysTest:
		return "PHY TEST"
	}
	return "PhysState(" + strconv.Itoa(int(s)) + ")"
}

// LinkLayer is the link layer under a port (IBV_LINK_LAYER_*).
type LinkLayer uint8

// Link layers.
const (
	LinkLayerUnspecified LinkLayer = 0
	LinkLayerInfiniBand  LinkLayer = 1
	LinkLayerEthernet    LinkLayer = 2 // RoCE
)

// String names the link layer as ibv_devinfo does: "Ethernet".
func (l LinkLayer) String() string {
	switch l {
	case LinkLayerUnspecified:
		return "Unspecified"
	case LinkLayerInfiniBand:
		return "InfiniBand"
	case LinkLayerEthernet:
		return "Ethernet"
	}
	return "LinkLayer(" + strconv.Itoa(int(l)) + ")"
}

// Width is a port's link width (enum ib_port_width): how many lanes.
type Width uint8

// Link widths.
const (
	Width1X  Width = 1
	Width4X  Width = 2
	Width8X  Width = 4
	Width12X Width = 8
	Width2X  Width = 16
)

// Lanes returns the number of lanes, or 0 for a value that is not a width.
func (w Width) Lanes() int {
	switch w {
	case Width1X:
		return 1
	case Width2X:
		return 2
	case Width4X:
		return 4
	case Width8X:
		return 8
	case Width12X:
		return 12
	}
	return 0
}

// String gives the width as ibv_devinfo does: "4X".
func (w Width) String() string {
	if n := w.Lanes(); n != 0 {
		return strconv.Itoa(n) + "X"
	}
	return "Width(" + strconv.Itoa(int(w)) + ")"
}

// Speed is the signalling rate of each lane of a port (enum ib_port_speed).
type Speed uint32

// Lane speeds.
const (
	SpeedSDR   Speed = 1   // 2.5 Gb/s
	SpeedDDR   Speed = 2   // 5 Gb/s
	SpeedQDR   Speed = 4   // 10 Gb/s
	SpeedFDR10 Speed = 8   // 10 Gb/s
	SpeedFDR   Speed = 16  // 14 Gb/s
	SpeedEDR   Speed = 32  // 25 Gb/s
	SpeedHDR   Speed = 64  // 50 Gb/s
	SpeedNDR   Speed = 128 // 100 Gb/s
	SpeedXDR   Speed = 256 // 200 Gb/s
)

// Gbps returns the lane speed in Gb/s, or 0 for a value that is not a speed.
func (s Speed) Gbps() float64 {
	switch s {
	case SpeedSDR:
		return 2.5
	case SpeedDDR:
		return 5
	case SpeedQDR, SpeedFDR10:
		return 10
	case SpeedFDR:
		return 14
	case SpeedEDR:
		return 25
	case SpeedHDR:
		return 50
	case SpeedNDR:
		return 100
	case SpeedXDR:
		return 200
	}
	return 0
}

// String gives the speed as ibv_devinfo does: "2.5 Gbps", "25.0 Gbps".
func (s Speed) String() string {
	if g := s.Gbps(); g != 0 {
		return strconv.FormatFloat(g, 'f', 1, 64) + " Gbps"
	}
	return "Speed(" + strconv.Itoa(int(s)) + ")"
}

// PortAttr holds the attributes of a port (struct ibv_port_attr), as
// Context.QueryPort reports them.
type PortAttr struct {
	State     PortState
	MaxMTU    MTU
	ActiveMTU MTU
	GIDTblLen int // size of the GID table, valid entries or not
	// PortCapFlags is enum ib_uverbs_query_port_cap_flags
	// (uapi.IB_UVERBS_PCF_*); PortCapFlags2 its continuation, which only
	// the QUERY_PORT ioctl reports.
	PortCapFlags  uint32
	PortCapFlags2 uint16
	MaxMsgSz      uint32 // the largest message, in bytes
	BadPkeyCntr   uint32
	QkeyViolCntr  uint32
	PkeyTblLen    int
	LID           uint16 // 0 on RoCE
	SMLID         uint16
	LMC           uint8
	MaxVLNum      uint8
	SMSL          uint8
	SubnetTimeout uint8
	InitTypeReply uint8
	ActiveWidth   Width
	// ActiveSpeed is the kernel's active_speed_ex where it reports one
	// (kernel ≥ 6.7: speeds beyond NDR), else active_speed, as ibv_devinfo
	// chooses.
	ActiveSpeed Speed
	PhysState   PhysState
	LinkLayer   LinkLayer
	// GRHRequired says that every address handle on the port needs a
	// global route header (IB_UVERBS_QPF_GRH_REQUIRED): true on RoCE.
	GRHRequired bool
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
		PortCapFlags:  l.PortCapFlags,
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
