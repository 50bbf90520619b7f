package rdmanet_test

import (
	"bufio"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"time"

	"github.com/goverbs/goverbs/rdmanet"
	"github.com/goverbs/goverbs/uverbs"
)

// The examples that make connections need an RDMA device whose network
// interface has the address they use, 192.0.2.1 (the VM tests' rxe0):
// there they run and go test checks their Output lines; on a host without
// one, TestMain leaves them to the VM.

// An echo server and its client: code written for net.Conn, over RDMA.
// CloseWrite tells the server that the client is done, as a TCP half-close
// does.
func Example() {
	l, err := rdmanet.Listen("rdma", "192.0.2.1:0") // port 0: any free one
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // until the client's CloseWrite
	}()

	c, err := rdmanet.Dial("rdma", l.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "hello over RDMA"); err != nil {
		log.Fatal(err)
	}
	if err := c.(*rdmanet.Conn).CloseWrite(); err != nil {
		log.Fatal(err)
	}
	echo, err := io.ReadAll(c) // until the server's Close
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(echo))
	// Output:
	// hello over RDMA
}

// net/http over RDMA: the server serves on an rdmanet Listener, and the
// client's Transport dials with a Dialer (which takes the "tcp" that
// http.Transport asks for to mean "rdma").
func ExampleDialer() {
	l, err := rdmanet.Listen("rdma", "192.0.2.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "hello, %s", r.URL.Path[1:])
	})}
	go srv.Serve(l)
	defer srv.Close()

	d := &rdmanet.Dialer{Timeout: 5 * time.Second}
	client := &http.Client{Transport: &http.Transport{DialContext: d.DialContext}}
	defer client.CloseIdleConnections()
	resp, err := client.Get("http://" + l.Addr().String() + "/gopher")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(resp.Status, string(body))
	// Output:
	// 200 OK hello, gopher
}

// One-sided access: the server registers memory and sends its token in
// the stream, as one line; the client reads the memory with RDMA READ,
// which the server's CPU takes no part in, and writes into it with RDMA
// WRITE.
func ExampleConn_ReadAt() {
	l, err := rdmanet.Listen("rdma", "192.0.2.1:0")
	if err != nil {
		log.Fatal(err)
	}
	defer l.Close()
	done := make(chan string)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			log.Fatal(err)
		}
		c := nc.(*rdmanet.Conn)
		defer c.Close()
		buf, err := uverbs.AllocBuffer(4096) // memory that does not move
		if err != nil {
			log.Fatal(err)
		}
		defer buf.Close()
		copy(buf.Bytes(), "the server's bytes")
		r, err := c.Register(buf.Bytes())
		if err != nil {
			log.Fatal(err)
		}
		defer r.Close()
		fmt.Fprintln(c, r.Token())          // the token's text form, a line
		bufio.NewReader(c).ReadString('\n') // the client's "done"
		done <- string(buf.Bytes()[:18])
	}()

	nc, err := rdmanet.Dial("rdma", l.Addr().String())
	if err != nil {
		log.Fatal(err)
	}
	c := nc.(*rdmanet.Conn)
	defer c.Close()
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		log.Fatal(err)
	}
	tok, err := rdmanet.ParseToken(line[:len(line)-1])
	if err != nil {
		log.Fatal(err)
	}
	got := make([]byte, 18)
	if _, err := c.ReadAt(tok, 0, got); err != nil {
		log.Fatal(err)
	}
	fmt.Printf("read: %s\n", got)
	if _, err := c.WriteAt(tok, 4, []byte("client")); err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(c, "done") // after WriteAt returned: the bytes are there
	fmt.Printf("the server has: %s\n", <-done)
	// Output:
	// read: the server's bytes
	// the server has: the client's bytes
}

// A token's text form, which fits a line of any protocol, and back.
func ExampleParseToken() {
	tok := rdmanet.Token{Addr: 0x7f3a5c200000, Len: 0x10000, RKey: 0x1a2b}
	fmt.Println(tok)
	back, err := rdmanet.ParseToken(tok.String())
	fmt.Println(back == tok, err)
	_, err = rdmanet.ParseToken("7f3a5c200000:10000")
	fmt.Println(err != nil)
	// Output:
	// 7f3a5c200000:10000:1a2b
	// true <nil>
	// true
}

var _ net.Conn = (*rdmanet.Conn)(nil)
