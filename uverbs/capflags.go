package uverbs

import (
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/uapi"
)

//go:generate go run golang.org/x/tools/cmd/stringer@v0.52.0 -type=deviceCapBit,portCapBit,rawPacketCapBit -linecomment -output=zcapflags_string.go

// DeviceCap is a set of a device's capabilities (enum
// ib_uverbs_device_cap_flags, the kernel's IB_UVERBS_DEVICE_* bits), as
// [DeviceAttr] reports them.
type DeviceCap uint64

// The device capabilities, one bit each; the values are the kernel's.
const (
	DeviceCapResizeMaxWR         DeviceCap = uapi.IB_UVERBS_DEVICE_RESIZE_MAX_WR
	DeviceCapBadPKeyCntr         DeviceCap = uapi.IB_UVERBS_DEVICE_BAD_PKEY_CNTR
	DeviceCapBadQKeyCntr         DeviceCap = uapi.IB_UVERBS_DEVICE_BAD_QKEY_CNTR
	DeviceCapRawMulti            DeviceCap = uapi.IB_UVERBS_DEVICE_RAW_MULTI
	DeviceCapAutoPathMig         DeviceCap = uapi.IB_UVERBS_DEVICE_AUTO_PATH_MIG
	DeviceCapChangePHYPort       DeviceCap = uapi.IB_UVERBS_DEVICE_CHANGE_PHY_PORT
	DeviceCapUDAVPortEnforce     DeviceCap = uapi.IB_UVERBS_DEVICE_UD_AV_PORT_ENFORCE
	DeviceCapCurrQPStateMod      DeviceCap = uapi.IB_UVERBS_DEVICE_CURR_QP_STATE_MOD
	DeviceCapShutdownPort        DeviceCap = uapi.IB_UVERBS_DEVICE_SHUTDOWN_PORT
	DeviceCapPortActiveEvent     DeviceCap = uapi.IB_UVERBS_DEVICE_PORT_ACTIVE_EVENT
	DeviceCapSysImageGUID        DeviceCap = uapi.IB_UVERBS_DEVICE_SYS_IMAGE_GUID
	DeviceCapRCRNRNAKGen         DeviceCap = uapi.IB_UVERBS_DEVICE_RC_RNR_NAK_GEN
	DeviceCapSRQResize           DeviceCap = uapi.IB_UVERBS_DEVICE_SRQ_RESIZE
	DeviceCapNNotifyCQ           DeviceCap = uapi.IB_UVERBS_DEVICE_N_NOTIFY_CQ
	DeviceCapMemWindow           DeviceCap = uapi.IB_UVERBS_DEVICE_MEM_WINDOW
	DeviceCapUDIPCsum            DeviceCap = uapi.IB_UVERBS_DEVICE_UD_IP_CSUM
	DeviceCapXRC                 DeviceCap = uapi.IB_UVERBS_DEVICE_XRC
	DeviceCapMemMgtExtensions    DeviceCap = uapi.IB_UVERBS_DEVICE_MEM_MGT_EXTENSIONS
	DeviceCapMemWindowType2A     DeviceCap = uapi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2A
	DeviceCapMemWindowType2B     DeviceCap = uapi.IB_UVERBS_DEVICE_MEM_WINDOW_TYPE_2B
	DeviceCapRCIPCsum            DeviceCap = uapi.IB_UVERBS_DEVICE_RC_IP_CSUM
	DeviceCapRawIPCsum           DeviceCap = uapi.IB_UVERBS_DEVICE_RAW_IP_CSUM
	DeviceCapManagedFlowSteering DeviceCap = uapi.IB_UVERBS_DEVICE_MANAGED_FLOW_STEERING
	DeviceCapRawScatterFCS       DeviceCap = uapi.IB_UVERBS_DEVICE_RAW_SCATTER_FCS
	DeviceCapPCIWriteEndPadding  DeviceCap = uapi.IB_UVERBS_DEVICE_PCI_WRITE_END_PADDING
	// The device takes WRFlush with FlushGlobal, WRFlush with
	// FlushPersistent, and WRAtomicWrite: rxe from Linux 6.2. They are
	// in DeviceAttr.DeviceCapFlagsEx only.
	DeviceCapFlushGlobal     DeviceCap = uapi.IB_UVERBS_DEVICE_FLUSH_GLOBAL
	DeviceCapFlushPersistent DeviceCap = uapi.IB_UVERBS_DEVICE_FLUSH_PERSISTENT
	DeviceCapAtomicWrite     DeviceCap = uapi.IB_UVERBS_DEVICE_ATOMIC_WRITE
)

// String names the set bits as the kernel does, without the
// IB_UVERBS_DEVICE_ prefix, joined by "|" ("SRQ_RESIZE|XRC"); a bit with
// no name is shown in hex, and the empty set as "0".
func (c DeviceCap) String() string {
	return bitSetString(uint64(c), "deviceCapBit", func(b uint64) string { return deviceCapBit(b).String() })
}

// Has reports whether c holds every capability of want.
func (c DeviceCap) Has(want DeviceCap) bool { return c&want == want }

// PortCap is a set of a port's capabilities (enum
// ib_uverbs_query_port_cap_flags, the kernel's IB_UVERBS_PCF_* bits), as
// [PortAttr] reports them.
type PortCap uint32

// The port capabilities, one bit each; the values are the kernel's.
const (
	PortCapSM                          PortCap = uapi.IB_UVERBS_PCF_SM
	PortCapNoticeSup                   PortCap = uapi.IB_UVERBS_PCF_NOTICE_SUP
	PortCapTrapSup                     PortCap = uapi.IB_UVERBS_PCF_TRAP_SUP
	PortCapOptIPDSup                   PortCap = uapi.IB_UVERBS_PCF_OPT_IPD_SUP
	PortCapAutoMigrSup                 PortCap = uapi.IB_UVERBS_PCF_AUTO_MIGR_SUP
	PortCapSLMapSup                    PortCap = uapi.IB_UVERBS_PCF_SL_MAP_SUP
	PortCapMKeyNVRAM                   PortCap = uapi.IB_UVERBS_PCF_MKEY_NVRAM
	PortCapPKeyNVRAM                   PortCap = uapi.IB_UVERBS_PCF_PKEY_NVRAM
	PortCapLEDInfoSup                  PortCap = uapi.IB_UVERBS_PCF_LED_INFO_SUP
	PortCapSMDisabled                  PortCap = uapi.IB_UVERBS_PCF_SM_DISABLED
	PortCapSysImageGUIDSup             PortCap = uapi.IB_UVERBS_PCF_SYS_IMAGE_GUID_SUP
	PortCapPKeySwExtPortTrapSup        PortCap = uapi.IB_UVERBS_PCF_PKEY_SW_EXT_PORT_TRAP_SUP
	PortCapExtendedSpeedsSup           PortCap = uapi.IB_UVERBS_PCF_EXTENDED_SPEEDS_SUP
	PortCapCMSup                       PortCap = uapi.IB_UVERBS_PCF_CM_SUP
	PortCapSNMPTunnelSup               PortCap = uapi.IB_UVERBS_PCF_SNMP_TUNNEL_SUP
	PortCapReinitSup                   PortCap = uapi.IB_UVERBS_PCF_REINIT_SUP
	PortCapDeviceMgmtSup               PortCap = uapi.IB_UVERBS_PCF_DEVICE_MGMT_SUP
	PortCapVendorClassSup              PortCap = uapi.IB_UVERBS_PCF_VENDOR_CLASS_SUP
	PortCapDRNoticeSup                 PortCap = uapi.IB_UVERBS_PCF_DR_NOTICE_SUP
	PortCapCapMaskNoticeSup            PortCap = uapi.IB_UVERBS_PCF_CAP_MASK_NOTICE_SUP
	PortCapBootMgmtSup                 PortCap = uapi.IB_UVERBS_PCF_BOOT_MGMT_SUP
	PortCapLinkLatencySup              PortCap = uapi.IB_UVERBS_PCF_LINK_LATENCY_SUP
	PortCapClientRegSup                PortCap = uapi.IB_UVERBS_PCF_CLIENT_REG_SUP
	PortCapLinkSpeedWidthTableSup      PortCap = uapi.IB_UVERBS_PCF_LINK_SPEED_WIDTH_TABLE_SUP
	PortCapVendorSpecificMADsTableSup  PortCap = uapi.IB_UVERBS_PCF_VENDOR_SPECIFIC_MADS_TABLE_SUP
	PortCapMcastPKeyTrapSuppressionSup PortCap = uapi.IB_UVERBS_PCF_MCAST_PKEY_TRAP_SUPPRESSION_SUP
	PortCapMcastFDBTopSup              PortCap = uapi.IB_UVERBS_PCF_MCAST_FDB_TOP_SUP
	PortCapHierarchyInfoSup            PortCap = uapi.IB_UVERBS_PCF_HIERARCHY_INFO_SUP
	PortCapIPBasedGIDs                 PortCap = uapi.IB_UVERBS_PCF_IP_BASED_GIDS
)

// String names the set bits as the kernel does, without the
// IB_UVERBS_PCF_ prefix, joined by "|" ("SM|CM_SUP"); a bit with no name
// is shown in hex, and the empty set as "0".
func (c PortCap) String() string {
	return bitSetString(uint64(c), "portCapBit", func(b uint64) string { return portCapBit(b).String() })
}

// Has reports whether c holds every capability of want.
func (c PortCap) Has(want PortCap) bool { return c&want == want }

// RawPacketCap is a set of a device's offloads for raw packet QPs (enum
// ib_uverbs_raw_packet_caps, the kernel's IB_UVERBS_RAW_PACKET_CAP_*
// bits), as [DeviceAttr] reports them.
type RawPacketCap uint32

// The raw packet capabilities, one bit each; the values are the kernel's.
const (
	RawPacketCapCVLANStripping RawPacketCap = uapi.IB_UVERBS_RAW_PACKET_CAP_CVLAN_STRIPPING
	RawPacketCapScatterFCS     RawPacketCap = uapi.IB_UVERBS_RAW_PACKET_CAP_SCATTER_FCS
	RawPacketCapIPCsum         RawPacketCap = uapi.IB_UVERBS_RAW_PACKET_CAP_IP_CSUM
	RawPacketCapDelayDrop      RawPacketCap = uapi.IB_UVERBS_RAW_PACKET_CAP_DELAY_DROP
)

// String names the set bits as the kernel does, without the
// IB_UVERBS_RAW_PACKET_CAP_ prefix, joined by "|" ("SCATTER_FCS|IP_CSUM");
// a bit with no name is shown in hex, and the empty set as "0".
func (c RawPacketCap) String() string {
	return bitSetString(uint64(c), "rawPacketCapBit", func(b uint64) string { return rawPacketCapBit(b).String() })
}

// Has reports whether c holds every capability of want.
func (c RawPacketCap) Has(want RawPacketCap) bool { return c&want == want }

// deviceCapBit, portCapBit and rawPacketCapBit name one bit each, for
// stringer: its String answers the line comment, or "deviceCapBit(N)"
// (the type's name, then the value) for a bit with no name.
type (
	deviceCapBit    uint64
	portCapBit      uint32
	rawPacketCapBit uint32
)

const (
	deviceCapBitResizeMaxWR         = deviceCapBit(DeviceCapResizeMaxWR)         // RESIZE_MAX_WR
	deviceCapBitBadPKeyCntr         = deviceCapBit(DeviceCapBadPKeyCntr)         // BAD_PKEY_CNTR
	deviceCapBitBadQKeyCntr         = deviceCapBit(DeviceCapBadQKeyCntr)         // BAD_QKEY_CNTR
	deviceCapBitRawMulti            = deviceCapBit(DeviceCapRawMulti)            // RAW_MULTI
	deviceCapBitAutoPathMig         = deviceCapBit(DeviceCapAutoPathMig)         // AUTO_PATH_MIG
	deviceCapBitChangePHYPort       = deviceCapBit(DeviceCapChangePHYPort)       // CHANGE_PHY_PORT
	deviceCapBitUDAVPortEnforce     = deviceCapBit(DeviceCapUDAVPortEnforce)     // UD_AV_PORT_ENFORCE
	deviceCapBitCurrQPStateMod      = deviceCapBit(DeviceCapCurrQPStateMod)      // CURR_QP_STATE_MOD
	deviceCapBitShutdownPort        = deviceCapBit(DeviceCapShutdownPort)        // SHUTDOWN_PORT
	deviceCapBitPortActiveEvent     = deviceCapBit(DeviceCapPortActiveEvent)     // PORT_ACTIVE_EVENT
	deviceCapBitSysImageGUID        = deviceCapBit(DeviceCapSysImageGUID)        // SYS_IMAGE_GUID
	deviceCapBitRCRNRNAKGen         = deviceCapBit(DeviceCapRCRNRNAKGen)         // RC_RNR_NAK_GEN
	deviceCapBitSRQResize           = deviceCapBit(DeviceCapSRQResize)           // SRQ_RESIZE
	deviceCapBitNNotifyCQ           = deviceCapBit(DeviceCapNNotifyCQ)           // N_NOTIFY_CQ
	deviceCapBitMemWindow           = deviceCapBit(DeviceCapMemWindow)           // MEM_WINDOW
	deviceCapBitUDIPCsum            = deviceCapBit(DeviceCapUDIPCsum)            // UD_IP_CSUM
	deviceCapBitXRC                 = deviceCapBit(DeviceCapXRC)                 // XRC
	deviceCapBitMemMgtExtensions    = deviceCapBit(DeviceCapMemMgtExtensions)    // MEM_MGT_EXTENSIONS
	deviceCapBitMemWindowType2A     = deviceCapBit(DeviceCapMemWindowType2A)     // MEM_WINDOW_TYPE_2A
	deviceCapBitMemWindowType2B     = deviceCapBit(DeviceCapMemWindowType2B)     // MEM_WINDOW_TYPE_2B
	deviceCapBitRCIPCsum            = deviceCapBit(DeviceCapRCIPCsum)            // RC_IP_CSUM
	deviceCapBitRawIPCsum           = deviceCapBit(DeviceCapRawIPCsum)           // RAW_IP_CSUM
	deviceCapBitManagedFlowSteering = deviceCapBit(DeviceCapManagedFlowSteering) // MANAGED_FLOW_STEERING
	deviceCapBitRawScatterFCS       = deviceCapBit(DeviceCapRawScatterFCS)       // RAW_SCATTER_FCS
	deviceCapBitPCIWriteEndPadding  = deviceCapBit(DeviceCapPCIWriteEndPadding)  // PCI_WRITE_END_PADDING
	deviceCapBitFlushGlobal         = deviceCapBit(DeviceCapFlushGlobal)         // FLUSH_GLOBAL
	deviceCapBitFlushPersistent     = deviceCapBit(DeviceCapFlushPersistent)     // FLUSH_PERSISTENT
	deviceCapBitAtomicWrite         = deviceCapBit(DeviceCapAtomicWrite)         // ATOMIC_WRITE
)

const (
	portCapBitSM                          = portCapBit(PortCapSM)                          // SM
	portCapBitNoticeSup                   = portCapBit(PortCapNoticeSup)                   // NOTICE_SUP
	portCapBitTrapSup                     = portCapBit(PortCapTrapSup)                     // TRAP_SUP
	portCapBitOptIPDSup                   = portCapBit(PortCapOptIPDSup)                   // OPT_IPD_SUP
	portCapBitAutoMigrSup                 = portCapBit(PortCapAutoMigrSup)                 // AUTO_MIGR_SUP
	portCapBitSLMapSup                    = portCapBit(PortCapSLMapSup)                    // SL_MAP_SUP
	portCapBitMKeyNVRAM                   = portCapBit(PortCapMKeyNVRAM)                   // MKEY_NVRAM
	portCapBitPKeyNVRAM                   = portCapBit(PortCapPKeyNVRAM)                   // PKEY_NVRAM
	portCapBitLEDInfoSup                  = portCapBit(PortCapLEDInfoSup)                  // LED_INFO_SUP
	portCapBitSMDisabled                  = portCapBit(PortCapSMDisabled)                  // SM_DISABLED
	portCapBitSysImageGUIDSup             = portCapBit(PortCapSysImageGUIDSup)             // SYS_IMAGE_GUID_SUP
	portCapBitPKeySwExtPortTrapSup        = portCapBit(PortCapPKeySwExtPortTrapSup)        // PKEY_SW_EXT_PORT_TRAP_SUP
	portCapBitExtendedSpeedsSup           = portCapBit(PortCapExtendedSpeedsSup)           // EXTENDED_SPEEDS_SUP
	portCapBitCMSup                       = portCapBit(PortCapCMSup)                       // CM_SUP
	portCapBitSNMPTunnelSup               = portCapBit(PortCapSNMPTunnelSup)               // SNMP_TUNNEL_SUP
	portCapBitReinitSup                   = portCapBit(PortCapReinitSup)                   // REINIT_SUP
	portCapBitDeviceMgmtSup               = portCapBit(PortCapDeviceMgmtSup)               // DEVICE_MGMT_SUP
	portCapBitVendorClassSup              = portCapBit(PortCapVendorClassSup)              // VENDOR_CLASS_SUP
	portCapBitDRNoticeSup                 = portCapBit(PortCapDRNoticeSup)                 // DR_NOTICE_SUP
	portCapBitCapMaskNoticeSup            = portCapBit(PortCapCapMaskNoticeSup)            // CAP_MASK_NOTICE_SUP
	portCapBitBootMgmtSup                 = portCapBit(PortCapBootMgmtSup)                 // BOOT_MGMT_SUP
	portCapBitLinkLatencySup              = portCapBit(PortCapLinkLatencySup)              // LINK_LATENCY_SUP
	portCapBitClientRegSup                = portCapBit(PortCapClientRegSup)                // CLIENT_REG_SUP
	portCapBitLinkSpeedWidthTableSup      = portCapBit(PortCapLinkSpeedWidthTableSup)      // LINK_SPEED_WIDTH_TABLE_SUP
	portCapBitVendorSpecificMADsTableSup  = portCapBit(PortCapVendorSpecificMADsTableSup)  // VENDOR_SPECIFIC_MADS_TABLE_SUP
	portCapBitMcastPKeyTrapSuppressionSup = portCapBit(PortCapMcastPKeyTrapSuppressionSup) // MCAST_PKEY_TRAP_SUPPRESSION_SUP
	portCapBitMcastFDBTopSup              = portCapBit(PortCapMcastFDBTopSup)              // MCAST_FDB_TOP_SUP
	portCapBitHierarchyInfoSup            = portCapBit(PortCapHierarchyInfoSup)            // HIERARCHY_INFO_SUP
	portCapBitIPBasedGIDs                 = portCapBit(PortCapIPBasedGIDs)                 // IP_BASED_GIDS
)

const (
	rawPacketCapBitCVLANStripping = rawPacketCapBit(RawPacketCapCVLANStripping) // CVLAN_STRIPPING
	rawPacketCapBitScatterFCS     = rawPacketCapBit(RawPacketCapScatterFCS)     // SCATTER_FCS
	rawPacketCapBitIPCsum         = rawPacketCapBit(RawPacketCapIPCsum)         // IP_CSUM
	rawPacketCapBitDelayDrop      = rawPacketCapBit(RawPacketCapDelayDrop)      // DELAY_DROP
)

// bitSetString returns the names of v's set bits, lowest first, joined by
// "|". name answers a bit's name, or, for a bit with none, stringer's
// fallback: bitType, then the value in parentheses; such a bit is shown
// in hex instead. Zero is "0".
func bitSetString(v uint64, bitType string, name func(bit uint64) string) string {
	if v == 0 {
		return "0"
	}
	var b []byte
	for v != 0 {
		bit := v & -v
		v &^= bit
		if len(b) != 0 {
			b = append(b, '|')
		}
		if s := name(bit); !strings.HasPrefix(s, bitType+"(") {
			b = append(b, s...)
		} else {
			b = append(b, "0x"...)
			b = strconv.AppendUint(b, bit, 16)
		}
	}
	return string(b)
}
