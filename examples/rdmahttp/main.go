// Rdmahttp is net/http over RDMA: an http.Server serves on an rdmanet
// Listener, and an http.Client whose Transport dials rdmanet sends it a
// GET, whose response it prints, then POSTs of random sizes that the
// server echoes with the body's SHA-256 in a header; the client checks
// each echo. Both sides run in one process, over RC connections on one
// RDMA device (loopback through the RDMA connection manager). Neither
// net/http nor the handlers know the bytes go over RDMA.
//
//	rdmahttp [-a 192.0.2.1:0] [-n 5] [-max 1048576] [-c 4]
package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/goverbs/goverbs/rdmanet"
)

func main() {
	addr := flag.String("a", "192.0.2.1:0", "listen on this `ip:port` (an RDMA device's netdev address; port 0 picks one)")
	n := flag.Int("n", 5, "`number` of POSTs after the GET")
	maxBody := flag.Int("max", 1<<20, "largest POST body, in `bytes`")
	clients := flag.Int("c", 4, "`number` of clients sending the POSTs at once")
	flag.Parse()
	if err := run(os.Stdout, *addr, *n, *maxBody, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "rdmahttp:", err)
		os.Exit(1)
	}
}

// sumHeader carries the SHA-256 of the body the server echoes.
const sumHeader = "Body-Sha256"

// handler serves GET / (a greeting naming both ends of the connection)
// and POST /echo (the body back, with its SHA-256 in sumHeader).
func handler(maxBody int) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		local := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
		fmt.Fprintf(w, "hello over %s: %s answers %s\n", local.Network(), local, r.RemoteAddr)
	})
	mux.HandleFunc("POST /echo", func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, int64(maxBody)))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		sum := sha256.Sum256(body)
		w.Header().Set(sumHeader, hex.EncodeToString(sum[:]))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.Write(body)
	})
	return mux
}

func run(out io.Writer, addr string, n, maxBody, clients int) (err error) {
	if n < 0 || maxBody < 0 || clients < 1 {
		return fmt.Errorf("-n %d -max %d -c %d: want n, max >= 0 and c >= 1", n, maxBody, clients)
	}
	l, err := rdmanet.Listen("rdma", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: handler(maxBody), ReadHeaderTimeout: time.Minute}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(l) }() // Serve closes l when it returns
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, srv.Shutdown(ctx))
		if serr := <-served; !errors.Is(serr, http.ErrServerClosed) {
			err = errors.Join(err, fmt.Errorf("server: %w", serr))
		}
	}()
	fmt.Fprintf(out, "server: listening on %s %s\n", l.Addr().Network(), l.Addr())

	// http.Transport asks for the network "tcp": rdmanet's DialContext
	// takes it as "rdma".
	d := &rdmanet.Dialer{Timeout: 10 * time.Second}
	tr := &http.Transport{
		DialContext:         d.DialContext,
		MaxIdleConnsPerHost: clients,
		// The request's bytes reach the Conn through a buffer of this size
		// (4 KiB by default), and each Write goes as its own messages:
		// fewer, fuller messages for a large body.
		WriteBufferSize: 64 << 10,
	}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: 2 * time.Minute}
	base := "http://" + l.Addr().String()

	if err := get(out, client, base+"/"); err != nil {
		return err
	}
	if n == 0 {
		return nil
	}
	return posts(out, client, base+"/echo", n, maxBody, clients)
}

// get sends one GET and prints its response.
func get(out io.Writer, client *http.Client, url string) error {
	fmt.Fprintf(out, "GET %s\n", url)
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "  %s %s\n  Content-Type: %s\n  Content-Length: %d\n\n  %s",
		resp.Proto, resp.Status, resp.Header.Get("Content-Type"), resp.ContentLength, body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// posts sends n POSTs of random sizes up to maxBody (the first of none,
// the second of maxBody) from clients goroutines at once, which the
// Transport gives a connection each, and checks every echo.
func posts(out io.Writer, client *http.Client, url string, n, maxBody, clients int) error {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, n)
	for i := range sizes {
		sizes[i] = r.IntN(maxBody + 1)
	}
	sizes[0] = 0
	if n > 1 {
		sizes[1] = maxBody
	}
	least, most := slices.Min(sizes), slices.Max(sizes)
	start := time.Now()
	next := make(chan int)
	errs := make(chan error, clients)
	var total atomic.Int64
	for w := range clients {
		go func() {
			var err error
			defer func() { errs <- err }()
			var seed [32]byte
			seed[0] = byte(w)
			fill := rand.NewChaCha8(seed)
			body := make([]byte, maxBody)
			for i := range next {
				if err != nil {
					continue // drain
				}
				b := body[:sizes[i]]
				fill.Read(b)
				if err = post(client, url, b); err != nil {
					err = fmt.Errorf("POST %d (%d bytes): %w", i, len(b), err)
					continue
				}
				total.Add(int64(len(b)))
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	var err error
	for range clients {
		err = errors.Join(err, <-errs)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%d POSTs echoed to %d clients: %d to %d bytes each, %.1f MiB each way, every SHA-256 equal, in %v\n",
		n, clients, least, most, float64(total.Load())/(1<<20), time.Since(start).Round(time.Millisecond))
	return nil
}

// post sends body to url and checks the echo and its SHA-256.
func post(client *http.Client, url string, body []byte) error {
	resp, err := client.Post(url, "application/octet-stream", bytes.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	echo, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(echo))
	}
	sum := sha256.Sum256(body)
	if !bytes.Equal(echo, body) {
		return fmt.Errorf("sent %d bytes, got back %d, not the same", len(body), len(echo))
	}
	if got := resp.Header.Get(sumHeader); got != hex.EncodeToString(sum[:]) {
		return fmt.Errorf("the server's SHA-256 %s, the client's %x", got, sum)
	}
	return nil
}
