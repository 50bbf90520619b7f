package uverbs_test

import (
	"testing"

	"github.com/goverbs/goverbs/uverbs"
)

func TestCapString(t *testing.T) {
	for _, tc := range []struct {
		got  string
		want string
	}{
		{uverbs.DeviceCap(0).String(), "0"},
		{uverbs.DeviceCapSRQResize.String(), "SRQ_RESIZE"},
		{(uverbs.DeviceCapResizeMaxWR | uverbs.DeviceCapXRC | uverbs.DeviceCapPCIWriteEndPadding).String(), "RESIZE_MAX_WR|XRC|PCI_WRITE_END_PADDING"},
		{(uverbs.DeviceCapPortActiveEvent | 0x200 | 1<<63).String(), "0x200|PORT_ACTIVE_EVENT|0x8000000000000000"},
		{uverbs.PortCap(0).String(), "0"},
		{(uverbs.PortCapCMSup | uverbs.PortCapIPBasedGIDs).String(), "CM_SUP|IP_BASED_GIDS"},
		{(uverbs.PortCapSM | 1).String(), "0x1|SM"},
		{uverbs.PortCapHierarchyInfoSup.String(), "HIERARCHY_INFO_SUP"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}
