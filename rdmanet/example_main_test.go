package rdmanet_test

import "github.com/goverbs/goverbs/internal/testutil"

// skipDeviceExamples leaves the Examples that connect over rxe0 to the VM
// on a host without an RDMA device (TestMain calls it); in the VM they run
// and their Output lines are checked.
func skipDeviceExamples() {
	testutil.SkipDeviceExamples("rdmanet", "Example", "ExampleDialer", "ExampleConn_ReadAt")
}
