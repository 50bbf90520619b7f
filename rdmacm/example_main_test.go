package rdmacm_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// TestMain leaves the Examples that connect over rxe0 to the VM on a host
// without an RDMA device; in the VM they run and their Output lines are
// checked.
func TestMain(m *testing.M) {
	testutil.SkipDeviceExamples("rdmacm", "ExampleDial", "ExampleListener_AcceptRequest", "ExampleDialUD", "ExampleListenUD")
	os.Exit(m.Run())
}
