package rxe

import (
	"errors"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/internal/provider"
	"github.com/goverbs/goverbs/internal/transport"
	"github.com/goverbs/goverbs/uapi"
)

// failingWrites is a transport.Kernel whose write(2) commands fail.
type failingWrites struct{ errno unix.Errno }

func (k failingWrites) Ioctl(unsafe.Pointer) unix.Errno { return unix.ENOTTY }
func (k failingWrites) Write([]byte) unix.Errno         { return k.errno }

// A doorbell that fails leaves the requests in the send queue, where a
// later doorbell (or the kernel's own run of the queue) sends them, as
// rdma-core's rxe_post_send does: PostSend reports them posted, and its
// error says which requests they are and that posting them again would
// send them twice (issue 36).
func TestPostSendDoorbellFails(t *testing.T) {
	sge := []provider.SGE{{Addr: 0x1000, Length: 8, LKey: 1}}
	wr := provider.SendWR{Opcode: provider.WRSend, SGL: sge}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{1, "after work request 0: "},
		{3, "after work requests 0 to 2: "},
	} {
		q := hostSendQP(t, uapi.IB_UVERBS_QPT_RC, 1)
		q.conn = transport.NewKernelConn(-1, uapi.RDMA_DRIVER_RXE, failingWrites{unix.EFAULT})
		wrs := make([]provider.SendWR, tc.n)
		for i := range wrs {
			wrs[i] = wr
		}
		n, err := q.PostSend(wrs)
		if n != tc.n || !errors.Is(err, unix.EFAULT) {
			t.Fatalf("PostSend of %d with a failing doorbell = %d, %v; want %d and EFAULT", tc.n, n, err, tc.n)
		}
		if p := q.sq.prod.Load(); p != uint32(tc.n) {
			t.Errorf("producer index %d, want %d: the requests stay in the ring", p, tc.n)
		}
		if msg := err.Error(); !strings.Contains(msg, tc.want) || !strings.Contains(msg, "do not post") {
			t.Errorf("error %q: want it to name %q and warn against posting again", msg, tc.want)
		}
	}
}
