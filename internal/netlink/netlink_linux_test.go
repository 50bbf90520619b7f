package netlink

import (
	"errors"
	"net/netip"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
)

// The harness's /init made rxe0 on d0 with RDMALinkAdd; read it back.
func TestRDMADevicesAndLinks(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	devs, err := RDMADevices()
	if err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, d := range devs {
		t.Logf("device %+v", d)
		if d.Name == "rxe0" {
			found = true
			if d.NodeGUID == 0 || d.Ports != 1 {
				t.Errorf("rxe0: node GUID %#x, %d ports; want nonzero and 1", d.NodeGUID, d.Ports)
			}
		}
	}
	if !found {
		t.Fatalf("rxe0 not in %+v", devs)
	}
	for _, d := range devs {
		if d.Name != "rxe0" {
			continue
		}
		cd, err := UverbsChardev(d.Index)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("chardev %+v", cd)
		if cd.Name != "uverbs0" || !cd.HaveDriverID || cd.DriverID != 14 { // RDMA_DRIVER_RXE
			t.Errorf("rxe0 chardev = %+v, want uverbs0 with driver id 14", cd)
		}
	}
	links, err := RDMALinks()
	if err != nil {
		t.Fatal(err)
	}
	want := RDMALink{Device: "rxe0", Port: 1, State: 4, PhysState: 5, Netdev: "d0"} // ACTIVE, LINK_UP
	for _, l := range links {
		if l.Device == "rxe0" {
			if l != want {
				t.Errorf("link = %+v, want %+v", l, want)
			}
			return
		}
	}
	t.Errorf("rxe0 not in links %+v", links)
}

// Add, refuse a duplicate, delete, refuse a second delete: what
// "goverbs link add/del" will do.
func TestRDMALinkAddDel(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	// There is no LinkDel: the dummy stays for the VM's life, and a
	// second run (-count 2) finds it and its address.
	if err := LinkAdd("nltest0", "dummy"); err != nil && !errors.Is(err, unix.EEXIST) {
		t.Fatal(err)
	}
	if err := LinkAdd("nltest0", "dummy"); !errors.Is(err, unix.EEXIST) {
		t.Errorf("second ip link add: err = %v, want EEXIST", err)
	}
	if err := AddrAdd("nltest0", netip.MustParsePrefix("192.0.2.201/32")); err != nil && !errors.Is(err, unix.EEXIST) {
		t.Fatal(err)
	}
	if err := LinkSetUp("nltest0"); err != nil {
		t.Fatal(err)
	}
	if err := RDMALinkAdd("rxetest", "rxe", "nltest0"); err != nil {
		t.Fatal(err)
	}
	err := RDMALinkAdd("rxetest", "rxe", "nltest0")
	if err == nil {
		t.Error("adding rxetest twice succeeded")
	}
	t.Logf("duplicate add: %v", err)
	if err := RDMALinkDel("rxetest"); err != nil {
		t.Fatal(err)
	}
	if err := RDMALinkDel("rxetest"); !errors.Is(err, unix.ENODEV) {
		t.Errorf("second delete: err = %v, want ENODEV", err)
	}
	if err := RDMALinkAdd("rxebad", "rxe", "nosuchnetdev"); err == nil {
		t.Error("rxe on a missing netdev succeeded")
	} else {
		t.Logf("rxe on a missing netdev: %v", err)
	}
}
