package uverbs

import (
	"errors"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/testutil"
)

// The harness creates rxe0 on the dummy netdev d0.
func TestDevicesFindsRXE(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	devs, err := Devices()
	if err != nil {
		t.Fatal(err)
	}
	d, err := DeviceByName("rxe0")
	if err != nil {
		t.Fatalf("%v (Devices() = %+v)", err, devs)
	}
	t.Logf("%+v (node GUID %s)", d, d.NodeGUID)
	if d.Path != testutil.DevicePath {
		t.Errorf("Path = %q, want %q", d.Path, testutil.DevicePath)
	}
	if d.CoreABI != 6 { // IB_USER_VERBS_ABI_VERSION
		t.Errorf("CoreABI = %d, want 6", d.CoreABI)
	}
	if d.ABIVersion < 1 || d.ABIVersion > 2 { // rxe: RXE_UVERBS_ABI_VERSION
		t.Errorf("ABIVersion = %d, want 1 or 2 for rxe", d.ABIVersion)
	}
	if d.NodeGUID == 0 {
		t.Errorf("NodeGUID is zero")
	}
	if d.DriverID != 14 { // RDMA_DRIVER_RXE
		t.Errorf("DriverID = %d, want 14 (rxe)", d.DriverID)
	}
	if d.Parent != "d0" {
		t.Errorf("Parent = %q, want the netdev d0", d.Parent)
	}
	f, err := os.OpenFile(d.Path, os.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatalf("open %s: %v", d.Path, err)
	}
	f.Close()
}

func TestDeviceByNameMissing(t *testing.T) {
	_, err := DeviceByName("nosuchdev0")
	if err == nil {
		t.Fatal("DeviceByName(nosuchdev0) succeeded")
	}
	if !errors.Is(err, unix.ENODEV) {
		t.Errorf("error %v does not match ENODEV", err)
	}
	t.Log(err)
}
