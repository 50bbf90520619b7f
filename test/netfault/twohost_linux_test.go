package netfault

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/goverbs/goverbs/internal/netlink"
	"github.com/goverbs/goverbs/rdmanet"
)

// requireTwoHosts skips the test outside the two-host guest; inside, the
// test's end heals the link whatever the test did to it.
func requireTwoHosts(t *testing.T) {
	t.Helper()
	if os.Getenv("GOVERBS_TWOHOST") != "1" {
		t.Skip("needs the VM's two hosts: go run ./test/vm -twohost")
	}
	t.Cleanup(func() {
		if err := heal(); err != nil {
			t.Errorf("healing the link after the test: %v", err)
		}
	})
}

// counter reads a netdev's statistic ("tx_packets").
func counter(t *testing.T, dev, name string) uint64 {
	t.Helper()
	b, err := os.ReadFile("/sys/class/net/" + dev + "/statistics/" + name)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// echoPair is a connection from host A (192.0.2.1, rxe0) to an echo
// server on host B (192.0.2.2, rxe1).
func echoPair(t *testing.T) net.Conn {
	t.Helper()
	l, err := rdmanet.Listen("rdma", "192.0.2.2:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	t.Logf("listening on %s; dialling from host A", l.Addr())
	d := &rdmanet.Dialer{Timeout: 10 * time.Second}
	c, err := d.DialContext(context.Background(), "rdma", l.Addr().String())
	if err != nil {
		dumpNet(t)
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if got := c.LocalAddr().String(); !strings.HasPrefix(got, "192.0.2.1:") {
		t.Fatalf("the connection's local address is %s, want host A's 192.0.2.1", got)
	}
	return c
}

// dumpNet logs what the kernel knows of the two hosts' link: the ARP
// table, the veths' packet counts, the rxe devices' counters.
func dumpNet(t *testing.T) {
	t.Helper()
	for _, f := range []string{"/proc/net/arp", "/proc/net/route", "/proc/net/snmp"} {
		b, _ := os.ReadFile(f)
		t.Logf("%s:\n%s", f, b)
	}
	for _, dev := range []string{"veth0", "veth1", "lo"} {
		t.Logf("%s: tx %d rx %d packets", dev, counter(t, dev, "tx_packets"), counter(t, dev, "rx_packets"))
	}
	for _, rxe := range []string{"rxe0", "rxe1"} {
		dir := "/sys/class/infiniband/" + rxe + "/ports/1/hw_counters/"
		ents, _ := os.ReadDir(dir)
		var s []string
		for _, e := range ents {
			b, _ := os.ReadFile(dir + e.Name())
			if v := strings.TrimSpace(string(b)); v != "0" {
				s = append(s, e.Name()+"="+v)
			}
		}
		gid, _ := os.ReadFile("/sys/class/infiniband/" + rxe + "/ports/1/gids/1")
		t.Logf("%s: gid 1 %s; %s", rxe, strings.TrimSpace(string(gid)), strings.Join(s, " "))
	}
}

// roundTrip writes b and reads its echo at once (an echo of more than
// the buffers hold deadlocks a writer that reads only after it wrote).
func roundTrip(c net.Conn, b []byte) error {
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(b)
		werr <- err
	}()
	got := make([]byte, len(b))
	if _, err := io.ReadFull(c, got); err != nil {
		return err
	}
	if err := <-werr; err != nil {
		return err
	}
	if !bytes.Equal(got, b) {
		return io.ErrUnexpectedEOF
	}
	return nil
}

// The two hosts' traffic crosses the veth pair, not the loopback: 1 MiB
// echoed moves veth0's and veth1's packet counts by hundreds, lo's by
// none of it. Then netem dropping every packet veth0 sends stalls the
// echo (rxe retries; its retry count of 7 never gives up), and taking
// netem away lets the same echo finish, intact.
func TestTrafficCrossesTheLink(t *testing.T) {
	requireTwoHosts(t)
	c := echoPair(t)
	tx0, rx1, lo := counter(t, "veth0", "tx_packets"), counter(t, "veth1", "rx_packets"), counter(t, "lo", "tx_packets")
	msg := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := roundTrip(c, msg); err != nil {
		dumpNet(t)
		t.Fatal(err)
	}
	c.SetDeadline(time.Time{})
	dtx0, drx1, dlo := counter(t, "veth0", "tx_packets")-tx0, counter(t, "veth1", "rx_packets")-rx1, counter(t, "lo", "tx_packets")-lo
	t.Logf("1 MiB echoed: veth0 sent %d packets, veth1 received %d, lo sent %d", dtx0, drx1, dlo)
	if dtx0 < 256 || drx1 < 256 || dlo > 16 {
		t.Errorf("the echo did not cross the veth pair: veth0 sent %d packets, veth1 received %d, lo sent %d", dtx0, drx1, dlo)
	}

	if err := netlink.NetemSet("veth0", netlink.Netem{Loss: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- roundTrip(c, msg[:4096]) }()
	select {
	case err := <-done:
		t.Fatalf("an echo went through a link that drops every packet: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := netlink.NetemDel("veth0"); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the echo after the loss ended: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the echo did not finish in 30 s after the loss ended")
	}
}
