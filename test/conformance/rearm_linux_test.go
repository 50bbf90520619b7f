package conformance

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/internal/testutil/rdmatest"
	"github.com/goverbs/goverbs/uverbs"
)

// 9b. Arming is one-shot, and an arm made after the event fired but
// before it was read counts: the next completion raises a second event.
// On mlx5 the device ignores an arm whose sequence number predates an
// event it raised, and the number moves when an event is read, so cq
// reads the channel's queued events before such an arm (issue #36). Two
// arms after the event still give one more event, not two.
func TestArmBeforeReadingTheEventRearms(t *testing.T) {
	for _, n := range []cq.Notify{cq.NextCompletion, cq.NextSolicited} {
		t.Run(map[cq.Notify]string{cq.NextCompletion: "next", cq.NextSolicited: "solicited"}[n], func(t *testing.T) {
			f := setup(t)
			scq, rcq := f.newCQ(t, 16), f.newCQ(t, 16)
			a, b := f.rcPair(t, scq, scq, rcq, rcq)
			arm := func(why string) {
				t.Helper()
				if err := rcq.ReqNotify(n); err != nil {
					t.Fatalf("%s: %v", why, err)
				}
			}
			// A solicited send fires either arm.
			recvd := func(wrid uint64) {
				t.Helper()
				f.recv(t, b, wrid, 1)
				f.send(t, a, wrid, uverbs.WRSend, uverbs.SendSolicited)
				rdmatest.PollN(t, scq, 1)
				rdmatest.PollN(t, rcq, 1)
			}
			arm("the first arm")
			recvd(1)
			f.queued(t) // the event fired; nobody has read it
			arm("an arm before reading the event")
			arm("a second arm before reading the event")
			if c := f.wait(t); c != rcq {
				t.Fatal("the first event names another CQ")
			}
			rcq.Ack(1)
			recvd(2)
			if c := f.wait(t); c != rcq {
				t.Fatal("the second event names another CQ")
			}
			rcq.Ack(1)
			f.noEvent(t, "two arms made while the first event was queued")
		})
	}
}

// queued waits up to 10 s for the channel to have an event queued,
// without reading it.
func (f *fix) queued(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		p := []unix.PollFd{{Fd: int32(f.ch.FD()), Events: unix.POLLIN}}
		n, err := unix.Poll(p, int(time.Until(deadline)/time.Millisecond))
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			t.Fatalf("poll of the channel: %v", err)
		case n == 0:
			t.Fatal("no completion event queued in 10 s")
		}
		return
	}
}
