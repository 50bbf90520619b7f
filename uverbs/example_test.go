package uverbs_test

import (
	"fmt"
	"log"
	"unsafe"

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
	fmt.Println(ctx.Device().Name, ctx.Device().NodeGUID, ctx.NumCompVectors())
}

// List the RDMA devices, like ibv_devices.
func ExampleDevices() {
	devs, err := uverbs.Devices()
	if err != nil {
		log.Fatal(err)
	}
	for _, d := range devs {
		fmt.Printf("%s\t%s\n", d.Name, d.NodeGUID)
	}
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
	fmt.Printf("addr %#x lkey %#x rkey %#x\n", mr.Addr(), mr.LKey(), mr.RKey())
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
	defer ch.Close() // after the CQ: EBUSY while a CQ uses it
	c, err := ctx.NewCQ(256, cq.WithChannel(ch), cq.WithUserValue(42))
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
	// The peer's QP number, PSN and GID come from an exchange of your own
	// (goverbs pingpong uses ibv_rc_pingpong's TCP one).
	var peerQPN, peerPSN, myPSN uint32 = 0x12, 0x34, 0x56
	var peerGID uverbs.GID
	steps := []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPInit, Port: 1, AccessFlags: uverbs.AccessRemoteWrite},
			uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrAccessFlags},
		{uverbs.QPAttr{State: uverbs.QPRTR, PathMTU: uverbs.MTU1024, DestQPN: peerQPN, RQPSN: peerPSN,
			MaxDestRdAtomic: 1, MinRNRTimer: 12,
			AH: uverbs.AHAttr{IsGlobal: true, Port: 1, GRH: uverbs.GlobalRoute{DGID: peerGID, SGIDIndex: 1, HopLimit: 64}}},
			uverbs.QPAttrState | uverbs.QPAttrAV | uverbs.QPAttrPathMTU | uverbs.QPAttrDestQPN |
				uverbs.QPAttrRQPSN | uverbs.QPAttrMaxDestRdAtomic | uverbs.QPAttrMinRNRTimer},
		{uverbs.QPAttr{State: uverbs.QPRTS, SQPSN: myPSN, Timeout: 14, RetryCnt: 7, RNRRetry: 7, MaxRdAtomic: 1},
			uverbs.QPAttrState | uverbs.QPAttrSQPSN | uverbs.QPAttrTimeout | uverbs.QPAttrRetryCnt |
				uverbs.QPAttrRNRRetry | uverbs.QPAttrMaxQPRdAtomic},
	}
	for _, s := range steps {
		if err := qp.Modify(&s.attr, s.mask); err != nil {
			log.Fatal(err)
		}
	}
	fmt.Println("QP", qp.QPN(), "is ready to send; its CQ holds", c.Size())
}

// UD: a datagram QP sends to a remote QP through an address handle; on
// RoCE the handle is global (destination GID, source GID index).
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
	c, err := ctx.NewCQ(64)
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	qp, err := pd.NewQP(uverbs.QPConfig{Type: uverbs.UD, SendCQ: c, RecvCQ: c,
		Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		log.Fatal(err)
	}
	defer qp.Close()
	const qkey = 0x11111111
	for _, step := range []struct {
		attr uverbs.QPAttr
		mask uverbs.QPAttrMask
	}{
		{uverbs.QPAttr{State: uverbs.QPInit, Port: 1, QKey: qkey}, uverbs.QPAttrState | uverbs.QPAttrPKeyIndex | uverbs.QPAttrPort | uverbs.QPAttrQKey},
		{uverbs.QPAttr{State: uverbs.QPRTR}, uverbs.QPAttrState},
		{uverbs.QPAttr{State: uverbs.QPRTS, SQPSN: 1}, uverbs.QPAttrState | uverbs.QPAttrSQPSN},
	} {
		if err := qp.Modify(&step.attr, step.mask); err != nil {
			log.Fatal(err)
		}
	}
	gid, err := ctx.QueryGID(1, 1) // the peer's GID comes from your exchange; here, our own
	if err != nil {
		log.Fatal(err)
	}
	ah, err := pd.NewAH(uverbs.AHAttr{IsGlobal: true, Port: 1,
		GRH: uverbs.GlobalRoute{DGID: gid.GID, SGIDIndex: 1, HopLimit: 64}})
	if err != nil {
		log.Fatal(err)
	}
	defer ah.Close()
	payload := []byte("hello")
	_, err = qp.PostSend([]uverbs.SendWR{{WRID: 1, Opcode: uverbs.WRSend, Flags: uverbs.SendSignaled | uverbs.SendInline,
		SGL: []uverbs.SGE{{Addr: uint64(uintptr(unsafe.Pointer(&payload[0]))), Length: uint32(len(payload))}},
		AH:  ah, RemoteQPN: qp.QPN(), RemoteQKey: qkey}})
	fmt.Println(err)
}
