// Package plan is the contract between the VM harness on the host and its
// /init inside the guest: what to set up and what to run, written by the
// host as JSON into the initramfs, and the marker lines the guest prints
// on the serial console for the host to read.
package plan

// Path is where the plan lies inside the initramfs.
const Path = "/goverbs/plan.json"

// Markers that the guest prints at the start of a line on the console.
const (
	MarkInit = "GOVERBS-VM: init started" // /init runs: the boot worked
	MarkStep = "GOVERBS-VM: step "        // + "<name> rc=<n> took=<dur>"
	MarkExit = "GOVERBS-VM: exit status " // + "<n>"; the last line of a run
	// MarkFile carries a file out of the guest (a profile): lines of
	// "<name> <base64 chunk>", then "<name> end". "/init dump PATH..."
	// prints them; the host leaves them off its copy of the console.
	MarkFile = "GOVERBS-VM: file "
)

// EnvInVM is the variable /init sets for every step, with value "1", so
// that device tests fail instead of skipping when there is no device.
const EnvInVM = "GOVERBS_IN_VM"

// Plan is everything /init needs.
type Plan struct {
	// Modules are .ko paths inside the initramfs, in load order.
	Modules []string
	// Netdevs are created, addressed and brought up in order.
	Netdevs []Netdev
	// RDMALinks are created after the netdevs, like "rdma link add".
	RDMALinks []RDMALink
	// Devices are device nodes that must exist before the first step
	// ("/dev/infiniband/rdma_cm"); /init waits for each and prints its mode.
	Devices []string
	// Env is added to every step's environment.
	Env []string
	// Steps run one after another; all run even after a failure.
	Steps []Step
	// Break makes /init misbehave on purpose, for the harness's self-test:
	// "exit" returns from /init right away, which panics the kernel.
	Break string
}

// Netdev is one network device to create in the guest.
type Netdev struct {
	Name string
	Kind string // "dummy", or "veth" (then Peer is created too)
	Peer string
	Addr string // "192.0.2.1/24", or empty
	// Addr6 is an IPv6 address it gets too ("2001:db8::1/64"), or empty.
	// Duplicate address detection is off in the guest, so that it and
	// the link-local address are usable at once.
	Addr6 string
	// PeerAddr is the veth peer's address. With both set, /init routes
	// the traffic between the two addresses across the pair, not
	// through the loopback, so that netem on either end reaches it: two
	// hosts in one namespace.
	PeerAddr string
}

// RDMALink is one software RDMA device to create.
type RDMALink struct {
	Name   string // "rxe0"
	Type   string // "rxe"
	Netdev string // "d0"
	// Wait for this char device before going on ("/dev/infiniband/uverbs0").
	WaitFor string
}

// Step is one program to run.
type Step struct {
	Name       string
	Argv       []string
	Dir        string
	Env        []string
	TimeoutSec int
	// LibPath, if set, becomes LD_LIBRARY_PATH: for dynamically linked
	// programs from Debian packages.
	LibPath string
	// Background starts the step and goes on to the next without waiting
	// (a server for the next step's client); /init waits for it after the
	// last step, within its time limit.
	Background bool
	// StopAfterNext, for a Background step, interrupts it (SIGINT) once
	// the next step that is not Background ends, and counts its end by
	// that signal as success: a server that serves until it is stopped,
	// as rdma-core's cmtime does.
	StopAfterNext bool
	// Prefix, if set, starts each line of the step's output, to tell
	// apart steps that run at once.
	Prefix string
	// DelayMs waits before starting the step (a client's server needs a
	// moment to listen).
	DelayMs int
	// Counters, if set, is a directory of counter files (an RDMA port's
	// hw_counters): /init prints how each moved over the step, to tell
	// whether two tools moving the same data made the device do the same
	// work (packets, retries, RNR NAKs).
	Counters string
}
