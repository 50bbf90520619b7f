//go:build !linux

package rdmanet_test

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	skipDeviceExamples()
	os.Exit(m.Run())
}
