//go:build linux

package uverbs_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os/signal"
	"syscall"

	"github.com/goverbs/goverbs/uverbs"
)

// Print what a device can do, like ibv_devinfo -v.
func ExampleContext_QueryDevice() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	a, err := ctx.QueryDevice()
	if err != nil {
		log.Fatal(err)
	}
	// Also a.FWVersion, a.NodeGUID, a.MaxQP, a.MaxQPWR, a.MaxMRSize, …
	fmt.Printf("%d port(s), room for a CQ of 4096: %v\n", a.PhysPortCnt, a.MaxCQE >= 4096)
	// Output:
	// 1 port(s), room for a CQ of 4096: true
}

// Check that a port is up, and which MTU a connection over it can use.
func ExampleContext_QueryPort() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	p, err := ctx.QueryPort(1)
	if err != nil {
		log.Fatal(err) // query port rxe0: port 2: invalid argument
	}
	if p.State != uverbs.PortActive {
		log.Fatalf("port 1 is %v", p.State)
	}
	fmt.Printf("%v, %s link, active MTU %d bytes\n", p.State, p.LinkLayer, p.ActiveMTU.Bytes()) // and p.ActiveWidth, p.ActiveSpeed
	// Output:
	// PORT_ACTIVE, Ethernet link, active MTU 1024 bytes
}

// Pick the source GID for RoCE v2 over IPv4: what an address handle or a
// connected QP names as its SGIDIndex.
func ExampleContext_GIDTable() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	gids, err := ctx.GIDTable(1)
	if err != nil {
		log.Fatal(err)
	}
	for _, g := range gids { // ibv_devinfo -v prints g.Index, g.GID, g.Type, g.Netdev
		if g.Type == uverbs.GIDTypeRoCEv2 && g.GID.Addr().Is4In6() {
			fmt.Println("RoCE v2 over", g.GID.Addr().Unmap(), "on", g.Netdev) // use g.Index as SGIDIndex
		}
	}
	// Output:
	// RoCE v2 over 192.0.2.1 on d0
}

// Watch a device's async events until interrupted, like rdma-core's
// ibv_asyncwatch: the wait parks a goroutine, not a thread, and ends with
// the context.
func ExampleContext_WaitAsyncEvent() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT)
	defer stop()
	for {
		ev, err := dev.WaitAsyncEvent(ctx)
		if errors.Is(err, context.Canceled) {
			return
		}
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(ev) // port error (port 1)
		if port, ok := ev.Port(); ok && ev.Type == uverbs.EventPortActive {
			fmt.Println("port", port, "is back")
		}
		ev.Ack()
	}
}

// GIDs print as ibv_devinfo prints them: IPv6 text, IPv4-mapped for an
// IPv4 address.
func ExampleGID_String() {
	for _, s := range []string{
		"fe80:0000:0000:0000:7891:9eff:feb0:8d12", // as sysfs shows it
		"0000:0000:0000:0000:0000:ffff:c000:0201",
	} {
		g, err := uverbs.ParseGID(s)
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(g)
	}
	// Output:
	// fe80::7891:9eff:feb0:8d12
	// ::ffff:192.0.2.1
}

// Async event types describe themselves as libibverbs does, and say what
// their element is.
func ExampleAsyncEventType() {
	for _, t := range []uverbs.AsyncEventType{uverbs.EventPortErr, uverbs.EventCQErr, uverbs.EventQPFatal} {
		fmt.Printf("%s: a %s event\n", t, t.Element())
	}
	// Output:
	// port error: a port event
	// CQ error: a CQ event
	// local work queue catastrophic error: a QP event
}

// Read a port's hardware counters, as "rdma statistic show link rxe0/1"
// prints them.
func ExampleContext_PortCounters() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	cs, err := ctx.PortCounters(1)
	if err != nil {
		log.Fatal(err) // read port counters rxe0: port 2 beyond the device's 1: invalid argument
	}
	for _, c := range cs {
		if c.Name == "sent_pkts" || c.Name == "rcvd_pkts" {
			fmt.Printf("%s counted\n", c.Name) // and c.Value
		}
	}
	// Output:
	// sent_pkts counted
	// rcvd_pkts counted
}
