package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"github.com/goverbs/goverbs/cq"
	"github.com/goverbs/goverbs/uverbs"
)

// bytesOf views a driver struct as bytes, for the kernel to read or fill.
func bytesOf[T any](p *T) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(p)), unsafe.Sizeof(*p))
}

const pingpongIters = 1000

// pingpong runs goverbs' pingpong against rdma-core's ibv_rc_pingpong or
// ibv_ud_pingpong, each side once as the server. On the model, which
// lives in this process, both sides are goverbs QPs of this process.
func (e *env) pingpong(typ string) (string, error) {
	if e.model != nil {
		return e.pingpongInProcess(typ)
	}
	ibv, err := exec.LookPath("ibv_" + typ + "_pingpong")
	if err != nil {
		return "ibv_" + typ + "_pingpong not installed (apt-get install ibverbs-utils)", errSkip
	}
	dir, err := os.MkdirTemp("", "hwcheck")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(dir)
	gv := filepath.Join(dir, "goverbs")
	build := exec.Command("go", "build", "-o", gv, "./cmd/goverbs")
	build.Dir, build.Env = e.root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/goverbs: %v\n%s", err, out)
	}
	if err := e.findGID(nil); err != nil {
		return "", err
	}
	args := []string{"-d", e.dev.Name, "-g", strconv.Itoa(e.gid), "-n", strconv.Itoa(pingpongIters)}
	var details []string
	for i, p := range []struct{ server, client []string }{
		{append([]string{ibv, "-p", "18515"}, args...), append([]string{gv, "pingpong", "-t", typ, "-p", "18515"}, args...)},
		{append([]string{gv, "pingpong", "-t", typ, "-p", "18516"}, args...), append([]string{ibv, "-p", "18516"}, args...)},
	} {
		if err := runPair(p.server, append(p.client, "localhost")); err != nil {
			return strings.Join(details, "; "), err
		}
		details = append(details, []string{"rdma-core server, goverbs client", "goverbs server, rdma-core client"}[i])
	}
	return fmt.Sprintf("%d exchanges each way: %s", pingpongIters, strings.Join(details, "; ")), nil
}

// runPair starts the server, then the client, and waits for both (30 s).
func runPair(server, client []string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var sout, cout bytes.Buffer
	s := exec.CommandContext(ctx, server[0], server[1:]...)
	s.Stdout, s.Stderr = &sout, &sout
	if err := s.Start(); err != nil {
		return err
	}
	time.Sleep(time.Second) // the server listens
	c := exec.CommandContext(ctx, client[0], client[1:]...)
	c.Stdout, c.Stderr = &cout, &cout
	cerr := c.Run()
	serr := s.Wait()
	if cerr != nil || serr != nil {
		return fmt.Errorf("%s: %v\n%s\n%s: %v\n%s", filepath.Base(server[0]), serr, sout.String(), filepath.Base(client[0]), cerr, cout.String())
	}
	return nil
}

// pingpongInProcess exchanges pingpongIters messages between two QPs of
// the device, each waiting for the other's before it answers, as the
// pingpong programs do.
func (e *env) pingpongInProcess(typ string) (string, error) {
	f, err := e.fixture("", 64, false)
	if err != nil {
		return "", err
	}
	defer f.close()
	a, b := f.a, f.b
	var wr uverbs.SendWR
	const size, grh = 64, 40
	if typ == "ud" {
		cfg := uverbs.QPConfig{Type: uverbs.UD, SendCQ: f.scq, RecvCQ: f.rcq,
			Cap: uverbs.QPCap{MaxSendWR: 16, MaxRecvWR: 16, MaxSendSGE: 1, MaxRecvSGE: 1}}
		if a, err = f.pd.NewQP(cfg); err != nil {
			return "", err
		}
		defer a.Close()
		if b, err = f.pd.NewQP(cfg); err != nil {
			return "", err
		}
		defer b.Close()
		local := uverbs.Endpoint{PSN: 1, GID: f.gid} // both QPs: same device, same GID
		for _, q := range []*uverbs.QP{a, b} {
			local.QPN = q.QPN()
			if err := q.ConnectUD(local, nil); err != nil {
				return "", err
			}
		}
		ah, err := f.pd.NewAHTo(local, local, nil) // to this port's own GID
		if err != nil {
			return "", err
		}
		defer ah.Close()
		wr.AH, wr.RemoteQKey = ah, 0x11111111 // ConnectUD's default Q_Key
	}
	mem := f.buf.Bytes()
	recv := func(q *uverbs.QP, off int) error {
		sge, err := f.mr.SGE(off, grh+size)
		if err != nil {
			return err
		}
		_, err = q.PostRecv([]uverbs.RecvWR{{WRID: uint64(off), SGL: []uverbs.SGE{sge}}})
		return err
	}
	wait := func(q *cq.CQ) (cq.WC, error) {
		var w [1]cq.WC
		deadline := time.Now().Add(5 * time.Second)
		for {
			n, err := q.Poll(w[:])
			if err != nil || n == 1 {
				if err == nil && w[0].Status != cq.Success {
					err = fmt.Errorf("completion %+v", w[0])
				}
				return w[0], err
			}
			if time.Now().After(deadline) {
				return w[0], fmt.Errorf("no completion in 5 s")
			}
		}
	}
	start := time.Now()
	for i := range pingpongIters {
		for _, p := range []struct {
			from, to *uverbs.QP
			src, dst int
		}{{a, b, 0, 8192}, {b, a, 16384, 24576}} {
			if err := recv(p.to, p.dst); err != nil {
				return "", err
			}
			mem[p.src] = byte(i)
			w := wr
			w.WRID, w.Opcode, w.Flags = uint64(i), uverbs.WRSend, uverbs.SendSignaled
			sge, err := f.mr.SGE(p.src, size)
			if err != nil {
				return "", err
			}
			w.SGL = []uverbs.SGE{sge}
			w.RemoteQPN = p.to.QPN()
			if _, err := p.from.PostSend([]uverbs.SendWR{w}); err != nil {
				return "", err
			}
			if _, err := wait(f.scq); err != nil {
				return "", fmt.Errorf("exchange %d, send: %w", i, err)
			}
			rw, err := wait(f.rcq)
			if err != nil {
				return "", fmt.Errorf("exchange %d, receive: %w", i, err)
			}
			at := p.dst
			if typ == "ud" {
				at += grh
			}
			if mem[at] != byte(i) || rw.QPNum != p.to.QPN() {
				return "", fmt.Errorf("exchange %d: received %d on QP %#x", i, mem[at], rw.QPNum)
			}
		}
	}
	return fmt.Sprintf("%d exchanges of %d bytes, goverbs both sides in this process (%v an exchange; rdma-core cannot reach the model)",
		pingpongIters, size, (time.Since(start) / pingpongIters).Round(time.Microsecond)), nil
}
