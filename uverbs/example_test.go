package uverbs_test

import (
	"fmt"
	"log"
	"net/netip"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// Open a device by name and look at it.
func ExampleOpen() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err) // open rxe0: no such RDMA device (have: mlx5_0): no such device
	}
	defer ctx.Close()
	fmt.Println(ctx.Device().Name, ctx.NumCompVectors() > 0) // and NodeGUID, which differs by device
	// Output:
	// rxe0 true
}

// List the RDMA devices, like ibv_devices.
func ExampleDevices() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		if d.Name == "rxe0" {
			fmt.Println("found", d.Name) // and d.NodeGUID, as ibv_devices prints it
		}
	}
	// Output:
	// found rxe0
}

// Register memory outside the Go heap for the device.
func ExamplePD_RegMR() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	buf, err := uverbs.AllocBuffer(1 << 20) // page-aligned, outside the Go heap
	if err != nil {
		log.Fatal(err)
	}
	defer buf.Close() // after the MR
	mr, err := pd.RegMR(buf.Bytes(), uverbs.AccessLocalWrite|uverbs.AccessRemoteWrite|uverbs.AccessRemoteRead)
	if err != nil {
		log.Fatal(err)
	}
	defer mr.Close()
	_, _ = mr.LKey(), mr.RKey() // for SGEs, and for the peer's RDMA
	fmt.Println("registered", len(buf.Bytes()), "bytes")
	// Output:
	// registered 1048576 bytes
}

// A CQ with a completion channel, and an RC queue pair on it.
func ExamplePD_NewQP() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	ch, err := ctx.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	c, err := ctx.NewCQ(cq.Config{Size: 256, Channel: ch, UserValue: 42})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	qp, err := pd.NewQP(uverbs.QPConfig{
		Type: uverbs.RC, SendCQ: c, RecvCQ: c,
		Cap: uverbs.QPCap{MaxSendWR: 128, MaxRecvWR: 128, MaxSendSGE: 1, MaxRecvSGE: 1},
	})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Close()
	// Our endpoint: the QP, a starting PSN and a GID of port 1 found by
	// address (no GID index to guess). The peer's comes from an exchange of
	// your own: Endpoint's text is ibv_rc_pingpong's (goverbs pingpong
	// sends it over TCP).
	gid, err := ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.MustParseAddr("192.0.2.1"))
	if err != nil {
		log.Fatal(err)
	}
	local := uverbs.Endpoint{QPN: qp.QPN(), PSN: 0x56, GID: gid.GID}
	var remote uverbs.Endpoint
	if err := remote.UnmarshalText([]byte("0000:000012:000034:00000000000000000000ffffc0000202")); err != nil {
		log.Fatal(err)
	}
	// RESET → INIT → RTR → RTS, with ibv_rc_pingpong's and perftest's
	// defaults; ConnectOptions overrides them.
	if err := qp.ConnectRC(local, remote, nil); err != nil {
		log.Fatal(err)
	}
	fmt.Println("the QP is ready to send") // qp.QPN() names it to the peer
	// Output:
	// the QP is ready to send
}

// UD: a datagram QP sends to a remote QP through an address handle; on
// RoCE the handle is global (destination GID, source GID index), which
// NewAHTo works out from the two endpoints.
func ExamplePD_NewAH() {
	ctx, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer ctx.Close()
	pd, err := ctx.AllocPD()
	if err != nil {
		log.Fatal(err)
	}
	defer pd.Close()
	c, err := ctx.NewCQ(cq.Config{Size: 64})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.UD, SendCQ: c, RecvCQ: c,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1, MaxInlineData: 64}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Close()
	gid, err := ctx.FindGID(1, uverbs.GIDTypeRoCEv2, netip.Addr{}) // the first RoCE v2 GID
	if err != nil {
		log.Fatal(err)
	}
	local := uverbs.Endpoint{QPN: qp.QPN(), PSN: 1, GID: gid.GID}
	if err := qp.ConnectUD(local, nil); err != nil { // RESET → INIT (Q_Key DefaultQKey) → RTR → RTS
		log.Fatal(err)
	}
	remote := local // the peer's endpoint comes from your exchange; here, our own
	ah, err := pd.NewAHTo(local, remote, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer ah.Close()
	// A small payload goes inline, straight from a Go slice: no MR.
	err = qp.PostSendInline(uverbs.SendWR{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled,
		AH: ah, RemoteQPN: remote.QPN, RemoteQKey: uverbs.DefaultQKey}, []byte("hello"))
	// The receiver posts buffers of uverbs.UDRecvSize(n) bytes; ParseGRH
	// reads the sender's address from their first uverbs.GRHSize.
	fmt.Println(err)
	// Output:
	// <nil>
}
