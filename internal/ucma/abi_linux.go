package ucma

import (
	"errors"
	"io/fs"
	"os"

	"github.com/goverbs/goverbs/internal/errs"
	"github.com/goverbs/goverbs/internal/netlink"
)

// The sysfs files that say the ABI version, newest first, as librdmacm
// reads them.
var abiFiles = []string{"/sys/class/misc/rdma_cm/abi_version", "/sys/class/infiniband_ucma/abi_version"}

// ABIVersion returns the rdma_cm's ABI version as librdmacm learns it:
// from RDMA netlink (RDMA_NLDEV_CMD_GET_CHARDEV for "rdma_cm", whose
// RDMA_NLDEV_ATTR_CHARDEV_ABI's low 32 bits are the version), else from
// sysfs, else, with neither there, MaxABIVersion (librdmacm assumes the
// newest, and a command fails later if it is wrong). A version outside
// [MinABIVersion, MaxABIVersion] is an error wrapping ErrNotSupported.
func ABIVersion() (int, error) {
	if cd, err := netlink.ClientChardev(device); err == nil && cd.Name != "" {
		return checkABIVersion(int(uint32(cd.ABI)))
	}
	for _, p := range abiFiles {
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, &errs.OpError{Op: "abi version", Device: device, Err: err}
		}
		v, err := parseABIVersion(string(b))
		if err != nil {
			return 0, &errs.OpError{Op: "abi version", Device: device, Err: err}
		}
		return checkABIVersion(v)
	}
	return MaxABIVersion, nil
}
