package testutil

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

// SkipDeviceExamples leaves the named godoc Examples to the VM: a TestMain
// calls it before m.Run. Where RequireDevice would skip (no DevicePath,
// not in the VM) it adds the examples to -test.skip, after any pattern
// the user gave, and prints one line saying so; elsewhere they run and
// the testing package checks their Output lines.
func SkipDeviceExamples(pkg string, names ...string) {
	if InVM() {
		return
	}
	if _, err := os.Stat(DevicePath); err == nil {
		return
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	pat := "^(" + strings.Join(names, "|") + ")$"
	if f := flag.Lookup("test.skip"); f != nil && f.Value.String() != "" {
		pat = f.Value.String() + "|" + pat
	}
	if err := flag.Set("test.skip", pat); err != nil {
		fmt.Fprintf(os.Stderr, "testutil: %v\n", err)
		os.Exit(2)
	}
	fmt.Printf("%s: no RDMA device (%s): %d examples that need one are left to the VM (make vmtest RUN='^Example')\n",
		pkg, DevicePath, len(names))
}
