package uverbs

import (
	"fmt"

	"github.com/goverbs/goverbs/internal/devhook"
	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"golang.org/x/sys/unix"
)

func init() { devhook.Open = openOnKernel }

// openOnKernel opens a Context whose commands go to k, a device model: the
// same path as Device.Open after the char device is open.
func openOnKernel(name string, driverID uint32, fd int, k transport.Kernel) (any, error) {
	drv, ok := provider.Lookup(driverID)
	if !ok {
		unix.Close(fd)
		return nil, &OpError{Op: "open", Device: name, Err: fmt.Errorf("no provider for driver id %d: %w", driverID, ErrNotSupported)}
	}
	d := Device{Name: name, Path: "(model)", DriverID: driverID}
	return d.open(drv, fd, transport.NewKernelConn(fd, driverID, k))
}
