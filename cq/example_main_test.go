package cq_test

import (
	"os"
	"testing"

	"github.com/goverbs/goverbs/internal/testutil"
)

// TestMain leaves the Examples that open rxe0 to the VM on a host without
// an RDMA device; in the VM they run and their Output lines are checked.
func TestMain(m *testing.M) {
	testutil.SkipDeviceExamples("cq", "ExampleChannel_Wait", "ExampleChannel_Serve", "ExampleCQ_Poll")
	os.Exit(m.Run())
}
