package uverbs

import "strconv"

// The attributes Context.QueryDevice and Context.QueryPort report. They
// are shared by every GOOS; the queries themselves are in query_linux.go.

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
	DeviceCapFlags        DeviceCap    // the device's capabilities, the low 32 bits only
	DeviceCapFlagsEx      DeviceCap    // all of them, the high bits included
	RawPacketCapFlags     RawPacketCap // offloads for raw packet QPs

	// CompletionTimestampMask is the valid bits of a completion's
	// timestamp (cq.WC.Timestamp of a CQ with cq.DeviceClock
	// timestamps); 0 if the device does not stamp completions.
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
	return enumString(a, "AtomicCap", "ATOMIC_NONE", "ATOMIC_HCA", "ATOMIC_GLOB")
}

// enumString returns names[v], or where names has none the type's name
// and the value, "PortState(9)", as stringer's String methods do.
func enumString[T ~uint8](v T, typ string, names ...string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return typ + "(" + strconv.Itoa(int(v)) + ")"
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
	return enumString(s, "PortState", "PORT_NOP", "PORT_DOWN", "PORT_INIT", "PORT_ARMED", "PORT_ACTIVE", "PORT_ACTIVE_DEFER")
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
	return enumString(s, "PhysState", "", "SLEEP", "POLLING", "DISABLED",
		"PORT_CONFIGURATION TRAINNING", // sic, as ibv_devinfo spells it
		"LINK_UP", "LINK_ERROR_RECOVERY", "PHY TEST")
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
	return enumString(l, "LinkLayer", "Unspecified", "InfiniBand", "Ethernet")
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
	// PortCapFlags is the port's capabilities; PortCapFlags2 their
	// continuation, which only the QUERY_PORT ioctl reports.
	PortCapFlags  PortCap
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
