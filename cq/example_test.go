package cq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// The event loop by hand: arm, poll until empty, wait, acknowledge,
// re-arm. Polling after arming is what makes it lose nothing.
func ExampleChannel_Wait() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	c, err := dev.NewCQ(cq.Config{Size: 256, Channel: ch, UserValue: 42})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	wcs := make([]cq.WC, 64)
	for {
		if err := c.ReqNotify(cq.NextCompletion); err != nil {
			log.Fatal(err)
		}
		for n, _ := c.Poll(wcs); n > 0; n, _ = c.Poll(wcs) {
			for _, wc := range wcs[:n] {
				if wc.Status != cq.Success { // only WRID, Status, QPNum, VendorErr mean anything
					log.Printf("wr %d failed: %v", wc.WRID, wc.Status)
				}
			}
		}
		fired, err := ch.Wait(ctx) // parks the goroutine, not a thread; ctx ends it
		if err != nil {
			fmt.Println(err) // nothing was posted, so the deadline ends the wait
			return
		}
		fired.Ack(1) // acknowledge before Close; batching is fine
		fmt.Println("event for the CQ with user value", fired.UserValue())
	}
	// Output:
	// get cq event rxe0: context deadline exceeded
}

// Serve runs the same loop for one or many CQs on a channel.
func ExampleChannel_Serve() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	ch, err := dev.NewCompChannel()
	if err != nil {
		log.Fatal(err)
	}
	defer ch.Close()
	send, err := dev.NewCQ(cq.Config{Size: 256, Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer send.Close()
	recv, err := dev.NewCQ(cq.Config{Size: 256, Channel: ch})
	if err != nil {
		log.Fatal(err)
	}
	defer recv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = ch.Serve(ctx, []*cq.CQ{send, recv}, nil, func(c *cq.CQ, wcs []cq.WC) error {
		fmt.Println(len(wcs), "completions")
		return nil
	})
	fmt.Println(errors.Is(err, context.DeadlineExceeded)) // nothing was posted
	// Output:
	// true
}

// Polling without events: busy-poll into a reused slice, with no system
// call and no allocation.
func ExampleCQ_Poll() {
	dev, err := uverbs.Open("rxe0")
	if err != nil {
		log.Fatal(err)
	}
	defer dev.Close()
	c, err := dev.NewCQ(cq.Config{Size: 1024})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	wcs := make([]cq.WC, 16)
	n, err := c.Poll(wcs)
	if err != nil {
		log.Fatal(err)
	}
	for _, wc := range wcs[:n] {
		fmt.Println(wc.WRID, wc.Opcode, wc.Status, wc.ByteLen)
	}
	fmt.Println(n, "completions") // nothing was posted
	// Output:
	// 0 completions
}
