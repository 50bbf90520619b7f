// Package uverbs is the API goverbs users hold: RDMA devices and their
// contexts, and the kernel objects a completion queue lives among
// (protection domains, memory regions, queue pairs, address handles,
// async events). It speaks to /dev/infiniband/uverbsN directly through
// the kernel's uverbs ioctl ABI, with no cgo and no libibverbs.
//
// So far it finds devices in sysfs ([Devices], [DeviceByName]); opening a
// context and the verbs on it follow.
package uverbs
