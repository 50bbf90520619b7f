package uverbs_test

import (
	"fmt"
	"log"

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
	err = qp.Modify(&uverbs.QPAttr{State: uverbs.QPInit, Port: 1, AccessFlags: uverbs.AccessRemoteWrite},
		uverbs.QPAttrState|uverbs.QPAttrPKeyIndex|uverbs.QPAttrPort|uverbs.QPAttrAccessFlags)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("QP", qp.QPN(), "is in INIT; CQ holds", c.Size())
}
