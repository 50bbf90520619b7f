package main

import (
	"errors"

	"github.com/goverbs/goverbs/uverbs"
)

// openDevice opens the device named name, or the first one when name is
// empty, as rdma-core's tools do without -d.
func openDevice(name string) (*uverbs.Context, error) {
	if name != "" {
		return uverbs.Open(name)
	}
	devs, err := uverbs.Devices()
	if err != nil {
		return nil, err
	}
	if len(devs) == 0 {
		return nil, errors.New("no RDMA devices found")
	}
	return devs[0].Open()
}
