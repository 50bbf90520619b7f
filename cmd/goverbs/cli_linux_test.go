package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/internal/testutil"
	"github.com/goverbs/goverbs/uverbs"
)

// These tests run the subcommands in-process on the VM harness's rxe0
// (over the dummy netdev d0); outside the VM they skip.

// runCmd runs a subcommand's function with its output captured.
func runCmd(fn func(stdout, stderr io.Writer, args []string) int, args ...string) (stdout, stderr string, status int) {
	var o, e bytes.Buffer
	status = fn(&o, &e, args)
	return o.String(), e.String(), status
}

// wantOneLineError checks a failed command: the given status, nothing on
// stdout, one line on stderr that contains each of want.
func wantOneLineError(t *testing.T, stdout, stderr string, status, wantStatus int, want ...string) {
	t.Helper()
	if status != wantStatus {
		t.Errorf("exit status %d, want %d", status, wantStatus)
	}
	if stdout != "" {
		t.Errorf("stdout %q, want nothing", stdout)
	}
	if n := strings.Count(stderr, "\n"); n != 1 || !strings.HasSuffix(stderr, "\n") {
		t.Errorf("stderr has %d lines, want one: %q", n, stderr)
	}
	for _, w := range want {
		if !strings.Contains(stderr, w) {
			t.Errorf("stderr %q does not say %q", stderr, w)
		}
	}
}

func TestCLIDevinfo(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	d, err := uverbs.DeviceByName("rxe0")
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, status := runCmd(devinfoTo, "-d", "rxe0")
	t.Logf("goverbs devinfo -d rxe0:\n%s", out)
	if status != 0 || errOut != "" {
		t.Fatalf("exit status %d, stderr %q", status, errOut)
	}
	for _, want := range []string{
		"hca_id:\trxe0\n",
		"\tnode_guid:\t\t\t" + d.NodeGUID.String() + "\n",
		"\t\t\tstate:\t\t\tPORT_ACTIVE (4)\n",
		"\t\t\tlink_layer:\t\tEthernet\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q", want)
		}
	}
	// Without -d it prints every device, rxe0 among them.
	all, _, status := runCmd(devinfoTo)
	if status != 0 || !strings.Contains(all, out) {
		t.Errorf("devinfo (all devices): status %d, and rxe0's part differs from devinfo -d rxe0:\n%s", status, all)
	}
	list, _, status := runCmd(devinfoTo, "-l")
	if status != 0 || !strings.Contains(list, " found:\n") || !strings.Contains(list, "\trxe0\n") {
		t.Errorf("devinfo -l: status %d, output %q", status, list)
	}
}

func TestCLIDevinfoErrors(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	for _, tc := range []struct {
		name   string
		args   []string
		status int
		want   []string
	}{
		{"unknown device", []string{"-d", "nosuch"}, 1, []string{"nosuch", "no such RDMA device"}},
		{"port beyond the device", []string{"-d", "rxe0", "-i", "2"}, 1, []string{"rxe0", "no port 2"}},
		{"port zero", []string{"-i", "0"}, 1, []string{"port 0 out of range"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, status := runCmd(devinfoTo, tc.args...)
			wantOneLineError(t, out, errOut, status, tc.status, tc.want...)
		})
	}
	t.Run("bad flag", func(t *testing.T) {
		if out, _, status := runCmd(devinfoTo, "-x"); status != 2 || out != "" {
			t.Errorf("devinfo -x: exit status %d, stdout %q; want 2 and nothing", status, out)
		}
	})
}

// TestCLIBinary runs the goverbs binary the harness puts into the guest,
// for what only the process shows: exit statuses through main.
func TestCLIBinary(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	const bin = "/bin/goverbs"
	if _, err := os.Stat(bin); err != nil {
		if testutil.InVM() {
			t.Fatalf("the VM harness puts the goverbs tool at %s: %v", bin, err)
		}
		t.Skipf("no %s outside the VM harness", bin)
	}
	for _, tc := range []struct {
		args   []string
		status int
	}{
		{[]string{"devinfo", "-d", "rxe0"}, 0},
		{[]string{"devinfo", "-d", "nosuch"}, 1},
		{[]string{"devinfo", "-x"}, 2},
		{[]string{"link", "show", "rxe0"}, 0},
		{[]string{"link", "del"}, 2},
		{[]string{"link", "del", "nosuch"}, 1},
		{[]string{"res", "show", "qp"}, 0},
		{[]string{"res", "show", "qp", "link"}, 2},
		{[]string{"res", "show", "nosuch"}, 1},
		{[]string{"stat", "show", "link", "rxe0/1"}, 0},
		{[]string{"stat", "qp", "show"}, 2},
		{[]string{"stat", "show", "link", "nosuch"}, 1},
		{[]string{"perf", "-I", "-2"}, 2},
		{[]string{"perf", "-cpu", "-1"}, 2},
		{[]string{"pingpong", "-cpu", "100000"}, 2},
	} {
		cmd := exec.Command(bin, tc.args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		status := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			status = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if status != tc.status {
			t.Errorf("goverbs %s: exit status %d, want %d; stderr:\n%s", strings.Join(tc.args, " "), status, tc.status, &stderr)
		}
		if status == 1 && strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("goverbs %s: stderr is not one line: %q", strings.Join(tc.args, " "), &stderr)
		}
	}
}

func TestCLILinkShow(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	const want = "link rxe0/1 state ACTIVE physical_state LINK_UP netdev d0\n"
	for _, args := range [][]string{nil, {"show"}, {"show", "rxe0"}, {"list", "rxe0/1"}} {
		out, errOut, status := runCmd(linkTo, args...)
		if status != 0 || errOut != "" {
			t.Errorf("link %s: exit status %d, stderr %q", strings.Join(args, " "), status, errOut)
		}
		if !strings.Contains(out, want) {
			t.Errorf("link %s printed %q; want a line %q", strings.Join(args, " "), out, want)
		}
	}
	out, errOut, status := runCmd(linkTo, "show", "nosuch")
	wantOneLineError(t, out, errOut, status, 1, "nosuch", "no such RDMA device")
}

// TestCLILinkAddDel creates an rxe device on a dummy netdev of its own,
// shows it, deletes it, and checks the errors of the failures around.
func TestCLILinkAddDel(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	const (
		netdev = "gvcli0"
		spare  = "gvcli1" // a netdev with no rxe device on it
		name   = "rxetest"
	)
	// internal/netlink has no LinkDel: the dummies stay for the VM's
	// life, and a second run (-count=2) finds them.
	for _, n := range []string{netdev, spare} {
		if err := netlink.LinkAdd(n, "dummy"); err != nil && !errors.Is(err, unix.EEXIST) {
			t.Fatal(err)
		}
		if err := netlink.LinkSetUp(n); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { netlink.RDMALinkDel(name) }) // if the test stops half-way

	if out, errOut, status := runCmd(linkTo, "add", name, "type", "rxe", "netdev", netdev); status != 0 || out != "" || errOut != "" {
		t.Fatalf("link add: exit status %d, stdout %q, stderr %q", status, out, errOut)
	}
	out, errOut, status := runCmd(linkTo, "show", name)
	if status != 0 || errOut != "" || !strings.HasPrefix(out, "link "+name+"/1 state ") || !strings.HasSuffix(out, " netdev "+netdev+"\n") {
		t.Errorf("link show %s after add: exit status %d, stdout %q, stderr %q", name, status, out, errOut)
	}
	all, _, _ := runCmd(linkTo, "show")
	if !strings.Contains(all, "link rxe0/1 ") || !strings.Contains(all, "link "+name+"/1 ") {
		t.Errorf("link show lists\n%s\nwant rxe0/1 and %s/1", all, name)
	}

	t.Run("add again", func(t *testing.T) {
		// rxe refuses a second device on one netdev.
		out, errOut, status := runCmd(linkTo, "add", "rxetest2", "type", "rxe", "netdev", netdev)
		wantOneLineError(t, out, errOut, status, 1, "rdma link add rxetest2", "file exists", "goverbs link show")
	})
	t.Run("name taken", func(t *testing.T) {
		// ib_register_device refuses a name in use with ENFILE.
		out, errOut, status := runCmd(linkTo, "add", "rxe0", "type", "rxe", "netdev", spare)
		if status == 0 {
			runCmd(linkTo, "del", "rxe0") // which one this deletes, the test has failed anyway
		}
		wantOneLineError(t, out, errOut, status, 1, "rdma link add rxe0", "the name is taken")
	})
	t.Run("no netdev", func(t *testing.T) {
		out, errOut, status := runCmd(linkTo, "add", "rxetest3", "type", "rxe", "netdev", "nosuch0")
		wantOneLineError(t, out, errOut, status, 1, "rdma link add rxetest3", "no such device", "ip link show")
	})
	t.Run("unknown type", func(t *testing.T) {
		out, errOut, status := runCmd(linkTo, "add", "rxetest4", "type", "nosuch", "netdev", netdev)
		wantOneLineError(t, out, errOut, status, 1, "rdma link add rxetest4", "invalid argument", "modprobe")
	})

	for _, del := range []string{"del", "delete"} {
		if del == "delete" { // the second round: add it back first
			if _, errOut, status := runCmd(linkTo, "add", name, "type", "rxe", "netdev", netdev); status != 0 {
				t.Fatalf("link add again: exit status %d, stderr %q", status, errOut)
			}
		}
		if out, errOut, status := runCmd(linkTo, del, name); status != 0 || out != "" || errOut != "" {
			t.Fatalf("link %s: exit status %d, stdout %q, stderr %q", del, status, out, errOut)
		}
		if all, _, _ := runCmd(linkTo, "show"); strings.Contains(all, "link "+name+"/") {
			t.Errorf("link show after %s still lists %s:\n%s", del, name, all)
		}
	}
	out, errOut, status = runCmd(linkTo, "del", name)
	wantOneLineError(t, out, errOut, status, 1, "rdma link delete "+name, "no such RDMA device", "goverbs link show")
}

// ibvDevinfo runs rdma-core's ibv_devinfo, which the VM harness installs.
func ibvDevinfo(t *testing.T, args ...string) string {
	t.Helper()
	const bin = "/usr/bin/ibv_devinfo"
	if _, err := os.Stat(bin); err != nil {
		if testutil.InVM() {
			t.Fatalf("the VM harness installs rdma-core's ibverbs-utils: %v", err)
		}
		t.Skipf("no rdma-core ibv_devinfo to compare with: %v", err)
	}
	triplet := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	if triplet == "" {
		t.Skipf("no rdma-core libraries for %s in the VM", runtime.GOARCH)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH=/lib/"+triplet+":/usr/lib/"+triplet)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("ibv_devinfo %s: %v\n%s", strings.Join(args, " "), err, &stderr)
	}
	return string(out)
}

func TestCLIDevinfoMatchesRDMACore(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	for _, args := range [][]string{{"-d", "rxe0"}, {"-d", "rxe0", "-v"}, {"-d", "rxe0", "-i", "1", "-v"}} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			theirs := ibvDevinfo(t, args...)
			ours, errOut, status := runCmd(devinfoTo, args...)
			if status != 0 {
				t.Fatalf("goverbs devinfo: exit status %d: %s", status, errOut)
			}
			t.Logf("ibv_devinfo %s:\n%s", strings.Join(args, " "), theirs)
			t.Logf("goverbs devinfo %s:\n%s", strings.Join(args, " "), ours)
			compareDevinfo(t, parseDevinfoOutput(theirs), parseDevinfoOutput(ours))
		})
	}
}

// goverbs devices lists rxe0 and says rdma_cm is there (the VM loads
// rdma_ucm), with its ABI version.
func TestCLIDevices(t *testing.T) {
	testutil.RequireDevice(t, testutil.DevicePath)
	out, errOut, status := runCmd(devicesTo)
	t.Logf("goverbs devices:\n%s", out)
	if status != 0 || errOut != "" {
		t.Fatalf("exit status %d, stderr %q", status, errOut)
	}
	if !strings.Contains(out, "rxe0") || !strings.Contains(out, "\nrdma_cm: /dev/infiniband/rdma_cm, ABI 4\n") {
		t.Errorf("want rxe0 and the line %q", "rdma_cm: /dev/infiniband/rdma_cm, ABI 4")
	}
	if _, _, status := runCmd(devicesTo, "extra"); status != 2 {
		t.Errorf("devices with an argument: status %d, want 2", status)
	}
}
