package ucma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/uapi"
)

// DevicePath is the rdma_cm's misc device.
const DevicePath = "/dev/infiniband/rdma_cm"

// device is the OpError's Device of every command.
const device = "rdma_cm"

// The ABI versions goverbs speaks: those librdmacm accepts
// (rdma_cma_abi.h), which it drives alike.
const (
	MinABIVersion = uapi.RDMA_USER_CM_MIN_ABI_VERSION
	MaxABIVersion = uapi.RDMA_USER_CM_MAX_ABI_VERSION
)

// parseABIVersion reads the sysfs abi_version file's text ("4\n").
func parseABIVersion(s string) (int, error) {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return 0, fmt.Errorf("abi_version %q: not a number", s)
	}
	return v, nil
}

// checkABIVersion refuses a version goverbs does not speak.
func checkABIVersion(v int) (int, error) {
	if v < MinABIVersion || v > MaxABIVersion {
		return v, &errs.OpError{Op: "abi version", Device: device, Err: fmt.Errorf(
			"rdma_cm ABI version %d, goverbs speaks %d to %d: %w", v, MinABIVersion, MaxABIVersion, errs.ErrNotSupported)}
	}
	return v, nil
}
