package uverbs_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// TestMain leaves the Examples that open rxe0 to the VM on a host without
// an RDMA device; in the VM they run and their Output lines are checked.
// ExampleContext_WaitAsyncEvent waits for SIGINT, so it has no Output
// line and is only compiled.
func TestMain(m *testing.M) {
	testutil.SkipDeviceExamples("uverbs", "ExampleOpen", "ExampleDevices", "ExamplePD_RegMR", "ExamplePD_NewQP", "ExamplePD_NewAH",
		"ExampleContext_QueryDevice", "ExampleContext_QueryPort", "ExampleContext_GIDTable", "ExampleContext_PortCounters")
	os.Exit(m.Run())
}
