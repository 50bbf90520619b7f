// Package reliability holds goverbs' fault tests: what the library does
// when the world goes wrong under it, on real kernels in the VM harness.
// The RDMA device is deleted while objects are open; a QP is driven to the
// error state with work posted; RLIMIT_MEMLOCK is too low for an MR; a
// process exits, or is killed, without closing anything; many QPs and
// goroutines drive one CQ at once. docs/RELIABILITY.md lists every fault
// tried, what happens, and the test that proves it.
//
// The tests need rxe0 (testutil.RequireDevice: they skip outside the VM
// and fail inside it without a device). Some run a copy of the test binary
// as a child process (TestMain dispatches on GOVERBS_RELIABILITY_CHILD).
// The device-deletion test deletes rxe0 and creates it again before it
// ends, even when it fails, since other packages' tests run after it.
//
// Run them with:
//
//	go run ./test/vm -vms 6.1/amd64 -pkg ./test/reliability test
//	make vmrace    # the same suites under the race detector
package reliability
