package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"strconv"
	"time"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

func init() {
	register("pingpong", "RC or UD ping-pong, wire-compatible with ibv_rc_pingpong and ibv_ud_pingpong", func(args []string) int {
		return pingpong(os.Stdout, args)
	})
}

// The work request ids ibv_rc_pingpong uses; its pending-bit logic needs
// them to be distinct bits.
const (
	ppRecvWRID = 1
	ppSendWRID = 2
)

// ppMsgLen is the length of ibv_rc_pingpong's address message: an
// endpoint's text ("LID:QPN:PSN:GID", uverbs.Endpoint's) as a C string,
// with its NUL.
const ppMsgLen = uverbs.EndpointTextLen + 1

// ppWire is the address message for e; the tool's endpoints have
// 24-bit QPNs and PSNs and no MTU, address or key, so it cannot fail.
func ppWire(e uverbs.Endpoint) []byte {
	b := make([]byte, 0, ppMsgLen)
	b, err := e.AppendText(b)
	if err != nil {
		panic(err)
	}
	return append(b, 0)
}

// parseDest reads the peer's address message.
func parseDest(b []byte) (uverbs.Endpoint, error) {
	var e uverbs.Endpoint
	if err := e.UnmarshalText(b); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("bad address message: %w", err)
	}
	return e, nil
}

type ppConfig struct {
	port    int
	dev     string
	ibPort  int
	size    int
	mtu     uverbs.MTU
	rxDepth int
	iters   int
	sl      int
	events  bool
	gidx    int
	server  string
	ud      bool
	warmup  time.Duration
	cpu     cpuFlag // -cpu: the polling thread's CPU, if set
}

// udQKey is the Q_Key ibv_ud_pingpong uses, and udGRH the room a UD
// receive needs before the payload for the global route header.
const (
	udQKey = uverbs.DefaultQKey
	udGRH  = uverbs.GRHSize
)

func mtuOf(n int) (uverbs.MTU, bool) {
	switch n {
	case 256:
		return uverbs.MTU256, true
	case 512:
		return uverbs.MTU512, true
	case 1024:
		return uverbs.MTU1024, true
	case 2048:
		return uverbs.MTU2048, true
	case 4096:
		return uverbs.MTU4096, true
	}
	return 0, false
}

func pingpong(out io.Writer, args []string) int {
	fs := flag.NewFlagSet("pingpong", flag.ContinueOnError)
	var c ppConfig
	var mtu int
	fs.IntVar(&c.port, "p", 18515, "listen on/connect to TCP `port`")
	fs.StringVar(&c.dev, "d", "", "use RDMA `device` (default: the first)")
	fs.IntVar(&c.ibPort, "i", 1, "use `port` of the device")
	var typ string
	fs.StringVar(&typ, "t", "rc", "transport `type`: rc (as ibv_rc_pingpong) or ud (as ibv_ud_pingpong)")
	fs.IntVar(&c.size, "s", 0, "`size` of the messages (default 4096 for rc, 2048 for ud)")
	fs.IntVar(&mtu, "m", 1024, "path `mtu`")
	fs.IntVar(&c.rxDepth, "r", 500, "`number` of receives to post at a time")
	fs.IntVar(&c.iters, "n", 1000, "`number` of exchanges")
	fs.IntVar(&c.sl, "l", 0, "service `level`")
	fs.BoolVar(&c.events, "e", false, "sleep on CQ events (default: poll)")
	fs.IntVar(&c.gidx, "g", -1, "local port GID `index` (default: on RoCE, the first RoCE v2 GID)")
	fs.DurationVar(&c.warmup, "warmup", 0, "spin this `long` after connecting, before the timed exchanges (0: not at all)")
	fs.Var(&c.cpu, "cpu", cpuUsage)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: goverbs pingpong [flags]          start a server and wait for a connection")
		fmt.Fprintln(fs.Output(), "       goverbs pingpong [flags] HOST     connect to the server at HOST")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	switch fs.NArg() {
	case 0:
	case 1:
		c.server = fs.Arg(0)
	default:
		fs.Usage()
		return 2
	}
	switch typ {
	case "rc":
	case "ud":
		c.ud = true
	default:
		fs.Usage()
		return 2
	}
	if c.size == 0 {
		c.size = 4096
		if c.ud {
			c.size = 2048
		}
	}
	var ok bool
	if c.mtu, ok = mtuOf(mtu); !ok || c.port < 1 || c.port > 65535 || c.ibPort < 1 || c.size < 1 || c.rxDepth < 2 || c.iters < 1 {
		fs.Usage()
		return 2
	}
	if err := runPingpong(out, &c); err != nil {
		return fail("pingpong: %v", err)
	}
	return 0
}

func runPingpong(out io.Writer, c *ppConfig) error {
	onePoller()
	unpin, err := c.cpu.pin()
	if err != nil {
		return err
	}
	defer unpin()
	dev, err := openDevice(c.dev)
	if err != nil {
		return err
	}
	defer dev.Close()

	// UD receives land after a 40-byte GRH; the sends go from offset 40.
	grh := 0
	if c.ud {
		grh = udGRH
		port, err := dev.QueryPort(c.ibPort)
		if err != nil {
			return err
		}
		if mtu := port.ActiveMTU.Bytes(); c.size > mtu {
			return fmt.Errorf("requested size larger than port MTU (%d)", mtu)
		}
	}
	buf, err := uverbs.AllocBuffer(c.size + grh)
	if err != nil {
		return err
	}
	defer buf.Close()
	mem := buf.Bytes()
	for i := range mem {
		mem[i] = 0x7b
	}
	var ch *cq.Channel
	if c.events {
		if ch, err = dev.NewCompChannel(); err != nil {
			return err
		}
		defer ch.Close()
	}
	pd, err := dev.AllocPD()
	if err != nil {
		return err
	}
	defer pd.Close()
	mr, err := pd.RegMR(mem, uverbs.AccessLocalWrite)
	if err != nil {
		return err
	}
	defer mr.Close()
	q, err := dev.NewCQ(cq.Config{Size: c.rxDepth + 1, Channel: ch})
	if err != nil {
		return err
	}
	events := 0
	defer func() { q.Ack(events); q.Close() }()
	qpType := uverbs.RC
	if c.ud {
		qpType = uverbs.UD
	}
	qp, err := pd.NewQP(uverbs.QPConfig{Type: qpType, SendCQ: q, RecvCQ: q,
		Cap: uverbs.QPCap{MaxSendWR: 1, MaxRecvWR: uint32(c.rxDepth), MaxSendSGE: 1, MaxRecvSGE: 1}})
	if err != nil {
		return err
	}
	defer qp.Close()
	sendFlags := uverbs.SendSignaled
	if int(qp.Cap().MaxInlineData) >= c.size {
		sendFlags |= uverbs.SendInline
	}
	recvSGE, err := mr.SGE(0, c.size+grh)
	if err != nil {
		return err
	}
	sendSGE, err := mr.SGE(grh, c.size)
	if err != nil {
		return err
	}
	recvWR := []uverbs.RecvWR{{WRID: ppRecvWRID, SGL: []uverbs.SGE{recvSGE}}}
	postRecvs := func(n int) int {
		for i := 0; i < n; i++ {
			if _, err := qp.PostRecv(recvWR); err != nil {
				return i
			}
		}
		return n
	}
	// The receives go in once the QP has left RESET, before the peer
	// hears of it: UD's before the exchange, RC's as it connects.
	routs := 0
	fill := func() error {
		if routs = postRecvs(c.rxDepth); routs < c.rxDepth {
			return fmt.Errorf("couldn't post receive (%d)", routs)
		}
		return nil
	}
	if c.events {
		if err := q.ReqNotify(cq.NextCompletion); err != nil {
			return err
		}
	}
	port, err := dev.QueryPort(c.ibPort)
	if err != nil {
		return err
	}
	my := uverbs.Endpoint{LID: port.LID, QPN: qp.QPN(), PSN: rand.Uint32() & 0xffffff}
	if port.LinkLayer != uverbs.LinkLayerEthernet && my.LID == 0 {
		return errors.New("couldn't get local LID")
	}
	// The QP's options: ibv_rc_pingpong's and ibv_ud_pingpong's values.
	copts := &uverbs.ConnectOptions{Port: uint8(c.ibPort), PathMTU: c.mtu, SL: uint8(c.sl), HopLimit: 1,
		Access: uverbs.AccessLocalWrite, QKey: udQKey}
	switch {
	case c.gidx >= 0:
		g, err := dev.QueryGID(c.ibPort, c.gidx)
		if err != nil {
			return fmt.Errorf("can't read sgid of index %d: %w", c.gidx, err)
		}
		my.GID, copts.GIDIndex, copts.GIDType = g.GID, c.gidx, g.Type
	case port.LinkLayer == uverbs.LinkLayerEthernet: // RoCE needs a GID: no index to guess
		g, err := dev.FindGID(c.ibPort, uverbs.GIDTypeRoCEv2, netip.Addr{})
		if err != nil {
			return err
		}
		my.GID, copts.GIDIndex, copts.GIDType = g.GID, g.Index, g.Type
	}
	if c.ud {
		if err := qp.ConnectUD(my, copts); err != nil {
			return err
		}
		if err := fill(); err != nil {
			return err
		}
	}
	sep := "," // ibv_ud_pingpong prints a colon here
	if c.ud {
		sep = ":"
	}
	fmt.Fprintf(out, "  local address:  LID 0x%04x, QPN 0x%06x, PSN 0x%06x%s GID %s\n", my.LID, my.QPN, my.PSN, sep, my.GID)

	var ah *uverbs.AH
	defer func() {
		if ah != nil {
			ah.Close()
		}
	}()
	connect := func(rem uverbs.Endpoint) error {
		if c.ud {
			var err error
			ah, err = pd.NewAHTo(my, rem, copts)
			return err
		}
		if err := qp.ConnectRC(my, rem, copts); err != nil {
			return err
		}
		return fill()
	}
	var rem uverbs.Endpoint
	if c.server != "" {
		rem, err = ppClientExchange(c.server, c.port, my)
		if err == nil {
			err = connect(rem)
		}
	} else {
		rem, err = ppServerExchange(c.port, my, connect)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  remote address: LID 0x%04x, QPN 0x%06x, PSN 0x%06x, GID %s\n", rem.LID, rem.QPN, rem.PSN, rem.GID)

	sendWR := []uverbs.SendWR{{WRID: ppSendWRID, Opcode: uverbs.WRSend, Flags: sendFlags, SGL: []uverbs.SGE{sendSGE}}}
	if c.ud {
		sendWR[0].AH, sendWR[0].RemoteQPN, sendWR[0].RemoteQKey = ah, rem.QPN, udQKey
	}
	warmUp(c.warmup)
	pending := ppRecvWRID
	if c.server != "" {
		if _, err := qp.PostSend(sendWR); err != nil {
			return fmt.Errorf("couldn't post send: %w", err)
		}
		pending |= ppSendWRID
	}
	start := time.Now()
	scnt, rcnt := 0, 0
	wcs := make([]cq.WC, 2)
	for rcnt < c.iters || scnt < c.iters {
		var n int
		if c.events {
			fired, err := ch.Wait(context.Background())
			if err != nil {
				return fmt.Errorf("failed to get cq_event: %w", err)
			}
			events++
			if fired != q {
				return errors.New("CQ event for an unknown CQ")
			}
			if err := q.ReqNotify(cq.NextCompletion); err != nil {
				return err
			}
			if n, err = q.Poll(wcs); err != nil {
				return err
			}
		} else {
			for n == 0 {
				if n, err = q.Poll(wcs); err != nil {
					return err
				}
			}
		}
		for _, wc := range wcs[:n] {
			if wc.Status != cq.Success {
				return fmt.Errorf("failed status %s (%d) for wr_id %d", wc.Status, wc.Status, wc.WRID)
			}
			switch wc.WRID {
			case ppSendWRID:
				scnt++
			case ppRecvWRID:
				if wc.ByteLen != uint32(c.size+grh) {
					return fmt.Errorf("received %d bytes, want %d", wc.ByteLen, c.size+grh)
				}
				if routs--; routs <= 1 {
					routs += postRecvs(c.rxDepth - routs)
					if routs < c.rxDepth {
						return fmt.Errorf("couldn't post receive (%d)", routs)
					}
				}
				rcnt++
			default:
				return fmt.Errorf("completion for unknown wr_id %d", wc.WRID)
			}
			pending &^= int(wc.WRID)
			if scnt < c.iters && pending == 0 {
				if _, err := qp.PostSend(sendWR); err != nil {
					return fmt.Errorf("couldn't post send: %w", err)
				}
				pending = ppRecvWRID | ppSendWRID
			}
		}
	}
	usec := float64(time.Since(start).Microseconds())
	bytes := int64(c.size) * int64(c.iters) * 2
	fmt.Fprintf(out, "%d bytes in %.2f seconds = %.2f Mbit/sec\n", bytes, usec/1e6, float64(bytes)*8/usec)
	fmt.Fprintf(out, "%d iters in %.2f seconds = %.2f usec/iter\n", c.iters, usec/1e6, usec/float64(c.iters))
	for i, b := range mem[grh:] { // a UD buffer's first 40 bytes hold the last GRH
		if b != 0x7b {
			return fmt.Errorf("data check: byte %d is %#x, want 0x7b (the pattern both sides send)", i, b)
		}
	}
	return nil
}

// ppClientExchange is ibv_rc_pingpong's client side: send our address,
// read the server's, then say "done".
func ppClientExchange(host string, port int, my uverbs.Endpoint) (uverbs.Endpoint, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), 10*time.Second)
	if err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't connect to %s:%d: %w", host, port, err)
	}
	defer conn.Close()
	if _, err := conn.Write(ppWire(my)); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	msg := make([]byte, ppMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't read remote address: %w", err)
	}
	if _, err := conn.Write([]byte("done\x00")); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't write done: %w", err)
	}
	return parseDest(msg)
}

// ppServerExchange is the server side: read the client's address, connect
// the QP, send ours, and wait for the client's word.
func ppServerExchange(port int, my uverbs.Endpoint, connect func(uverbs.Endpoint) error) (uverbs.Endpoint, error) {
	ln, err := net.Listen("tcp", ":"+strconv.Itoa(port))
	if err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't listen to port %d: %w", port, err)
	}
	conn, err := ln.Accept()
	ln.Close()
	if err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("accept: %w", err)
	}
	defer conn.Close()
	msg := make([]byte, ppMsgLen)
	if _, err := io.ReadFull(conn, msg); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't read remote address: %w", err)
	}
	rem, err := parseDest(msg)
	if err != nil {
		return uverbs.Endpoint{}, err
	}
	if err := connect(rem); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't connect to remote QP: %w", err)
	}
	if _, err := conn.Write(ppWire(my)); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't send local address: %w", err)
	}
	// The client answers "done" (5 bytes); any answer will do.
	if _, err := conn.Read(msg); err != nil {
		return uverbs.Endpoint{}, fmt.Errorf("couldn't read the client's done: %w", err)
	}
	return rem, nil
}
