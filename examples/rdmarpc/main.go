// Rdmarpc is net/rpc over RDMA: an rpc.Server serves each connection an
// rdmanet Listener accepts, and an rpc.Client made on an rdmanet Conn
// calls it: Bytes.Sum (an argument's length and SHA-256) and Bytes.Echo
// (the argument back, with its SHA-256), with arguments of random sizes,
// from several goroutines at once over the one connection. Both sides run
// in one process, over an RC connection on one RDMA device (loopback
// through the RDMA connection manager).
//
//	rdmarpc [-a 192.0.2.1:0] [-n 10] [-max 1048576] [-c 4]
package main

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/rpc"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/rdmanet"
)

func main() {
	addr := flag.String("a", "192.0.2.1:0", "listen on this `ip:port` (an RDMA device's netdev address; port 0 picks one)")
	n := flag.Int("n", 10, "`number` of calls")
	maxArg := flag.Int("max", 1<<20, "largest argument, in `bytes`")
	callers := flag.Int("c", 4, "`number` of goroutines calling at once")
	flag.Parse()
	if err := run(os.Stdout, *addr, *n, *maxArg, *callers); err != nil {
		fmt.Fprintln(os.Stderr, "rdmarpc:", err)
		os.Exit(1)
	}
}

// Args is what a call sends.
type Args struct {
	Data []byte
}

// Reply is what a call gets back: Data only from Echo.
type Reply struct {
	Len  int
	Sum  [sha256.Size]byte
	Data []byte
}

// Bytes is the service; net/rpc calls its methods by name.
type Bytes struct {
	max int
}

// Sum answers with the length and SHA-256 of args.Data.
func (b *Bytes) Sum(args *Args, reply *Reply) error {
	if len(args.Data) > b.max {
		return fmt.Errorf("%d bytes: the most is %d", len(args.Data), b.max)
	}
	reply.Len, reply.Sum = len(args.Data), sha256.Sum256(args.Data)
	return nil
}

// Echo answers with args.Data itself, its length and its SHA-256.
func (b *Bytes) Echo(args *Args, reply *Reply) error {
	if err := b.Sum(args, reply); err != nil {
		return err
	}
	reply.Data = args.Data
	return nil
}

func run(out io.Writer, addr string, n, maxArg, callers int) (err error) {
	if n < 0 || maxArg < 0 || callers < 1 {
		return fmt.Errorf("-n %d -max %d -c %d: want n, max >= 0 and c >= 1", n, maxArg, callers)
	}
	srv := rpc.NewServer()
	if err := srv.Register(&Bytes{max: maxArg}); err != nil {
		return err
	}
	l, err := rdmanet.Listen("rdma", addr)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // rpc.Server.Accept, without its log line when l closes
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				srv.ServeConn(c) // until the client hangs up; it closes c
			}()
		}
	}()
	defer func() {
		err = errors.Join(err, l.Close())
		wg.Wait()
	}()
	fmt.Fprintf(out, "server: listening on %s %s\n", l.Addr().Network(), l.Addr())

	c, err := rdmanet.Dial("rdma", l.Addr().String())
	if err != nil {
		return err
	}
	client := rpc.NewClient(c)
	defer func() { err = errors.Join(err, client.Close()) }()
	fmt.Fprintf(out, "client: connected from %s %s\n", c.LocalAddr().Network(), c.LocalAddr())

	hello := []byte("hello over RDMA")
	var reply Reply
	if err := client.Call("Bytes.Sum", &Args{Data: hello}, &reply); err != nil {
		return err
	}
	fmt.Fprintf(out, "Bytes.Sum(%q) = %d bytes, SHA-256 %x\n", hello, reply.Len, reply.Sum)
	if reply.Len != len(hello) || reply.Sum != sha256.Sum256(hello) {
		return errors.New("Bytes.Sum answered wrong")
	}
	tooBig := make([]byte, maxArg+1)
	err = client.Call("Bytes.Sum", &Args{Data: tooBig}, &reply)
	fmt.Fprintf(out, "Bytes.Sum(%d bytes): %v\n", len(tooBig), err)
	if _, ok := err.(rpc.ServerError); !ok {
		return fmt.Errorf("Bytes.Sum of %d bytes: %v, want the server's error", len(tooBig), err)
	}
	if n == 0 {
		return nil
	}
	return calls(out, client, n, maxArg, callers)
}

// calls makes n calls, Echo and Sum in turn, with arguments of random
// sizes up to maxArg (the first of none, the second of maxArg), from
// callers goroutines at once, and checks every reply.
func calls(out io.Writer, client *rpc.Client, n, maxArg, callers int) error {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = r.IntN(maxArg + 1)
	}
	sizes[0] = 0
	if n > 1 {
		sizes[1] = maxArg
	}
	least, most := slices.Min(sizes), slices.Max(sizes)
	start := time.Now()
	next := make(chan int)
	errs := make(chan error, callers)
	var total atomic.Int64
	for w := range callers {
		go func() {
			var err error
			defer func() { errs <- err }()
			var seed [32]byte
			seed[0] = byte(w)
			fill := rand.NewChaCha8(seed)
			data := make([]byte, maxArg)
			for i := range next {
				if err != nil {
					continue // drain
				}
				args := &Args{Data: data[:sizes[i]]}
				fill.Read(args.Data)
				method := [2]string{"Bytes.Echo", "Bytes.Sum"}[i%2]
				if err = call(client, method, args); err != nil {
					err = fmt.Errorf("call %d, %s(%d bytes): %w", i, method, len(args.Data), err)
					continue
				}
				total.Add(int64(len(args.Data)))
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var err error
	for range callers {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d calls answered, Echo and Sum in turn from %d goroutines: arguments of %d to %d bytes, %.1f MiB in all, every reply right, in %v\n",
		n, callers, least, most, float64(total.Load())/(1<<20), time.Since(start).Round(time.Millisecond))
	return nil
}

// call calls method with args and checks the reply.
func call(client *rpc.Client, method string, args *Args) error {
	var reply Reply
	if err := client.Call(method, args, &reply); err != nil {
		return err
	}
	sum := sha256.Sum256(args.Data)
	if reply.Len != len(args.Data) || reply.Sum != sum {
		return fmt.Errorf("the server's length and SHA-256 %d %x, the client's %d %x", reply.Len, reply.Sum, len(args.Data), sum)
	}
	if method == "Bytes.Echo" && !bytes.Equal(reply.Data, args.Data) {
		return fmt.Errorf("sent %d bytes, got back %d, not the same", len(args.Data), len(reply.Data))
	}
	if method == "Bytes.Sum" && len(reply.Data) != 0 {
		return fmt.Errorf("Sum sent back %d bytes", len(reply.Data))
	}
	return nil
}
