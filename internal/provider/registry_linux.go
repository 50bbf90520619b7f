package provider

import (
	"fmt"
	"sync"
)

var (
	driversMu sync.RWMutex
	drivers   = map[uint32]Driver{}
)

// Register makes d the provider for devices whose driver id (enum
// rdma_driver_id, uapi.RDMA_DRIVER_*, as RDMA netlink reports it for the
// device's char device) is id. Each provider calls it from its init;
// uverbs imports every provider, so a program that imports uverbs has them
// all. A nil d or an id registered twice is a programming error and
// panics, as with database/sql's Register.
func Register(id uint32, d Driver) {
	if d == nil {
		panic(fmt.Sprintf("provider: Register of a nil driver for driver id %d", id))
	}
	driversMu.Lock()
	defer driversMu.Unlock()
	if old, dup := drivers[id]; dup {
		panic(fmt.Sprintf("provider: Register called twice for driver id %d (%s, then %s)", id, old.Name(), d.Name()))
	}
	drivers[id] = d
}

// Lookup returns the provider registered for driver id, if any.
func Lookup(id uint32) (Driver, bool) {
	driversMu.RLock()
	defer driversMu.RUnlock()
	d, ok := drivers[id]
	return d, ok
}
