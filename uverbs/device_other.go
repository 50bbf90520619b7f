//go:build !linux

package uverbs

// Devices returns ErrNotSupported: RDMA devices exist on Linux only.
func Devices() ([]Device, error) {
	return nil, &OpError{Op: "list devices", Err: ErrNotSupported}
}

// DeviceByName returns ErrNotSupported: RDMA devices exist on Linux only.
func DeviceByName(name string) (Device, error) {
	return Device{}, &OpError{Op: "open", Device: name, Err: ErrNotSupported}
}
