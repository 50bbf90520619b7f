// Package rdmanet is Go's net.Conn and net.Listener over RDMA: a reliable,
// ordered byte stream on an RC queue pair, made by package rdmacm, with
// no cgo. Code written for net.Conn (net/http, net/rpc, io.Copy) runs on
// it unchanged:
//
//	l, err := rdmanet.Listen("rdma", "192.0.2.1:8080")
//	go http.Serve(l, handler)
//	c := &http.Client{Transport: &http.Transport{DialContext: (&rdmanet.Dialer{}).DialContext}}
//
// (DialContext takes the network "tcp", which http.Transport asks for, to
// mean "rdma".)
//
// # The stream
//
// Each connection registers (ReadBuffers + WriteBuffers) × BufferSize
// bytes (Config; 192 KiB by default): a ring of read slots, which the
// peer writes into, and write buffers. Write copies the caller's bytes
// into the write buffers and posts an RDMA WRITE WITH IMMEDIATE into the
// next free slots of the peer's ring, as many slots at once as are free
// (up to half the ring); Write returns once every byte is in registered
// memory and posted, after which the QP delivers it in order unless the
// connection fails. Read copies out what has arrived and frees its slots.
//
// Flow control is by credits, one per slot of the peer's ring, told at
// the start (the hello in the connection's private data, with the ring's
// address and key) and handed back in each message's header as the
// peer's application reads. So a sender never overruns the ring nor
// meets receiver-not-ready, and a Write waits while the peer's
// application does not read. One credit is kept for credit and fin
// messages, which carry no bytes.
//
// # Waiting
//
// A goroutine of each connection waits for its completion events on the
// Go runtime's poller (no OS thread per connection) and wakes the Read or
// Write waiting. Deadlines (SetDeadline, SetReadDeadline,
// SetWriteDeadline) end a waiting or later call with an error wrapping
// os.ErrDeadlineExceeded whose Timeout() is true. Config.BusyPoll makes a
// waiting call poll the completion queue itself for a while first.
//
// # One-sided
//
// Conn.Register makes a Region of the caller's memory that the peer may
// read and write; its Token, carried however the application likes
// (String, ParseToken), lets the peer's Conn.ReadAt and Conn.WriteAt
// reach it with RDMA READ and WRITE, which return once the operation
// completed. Dial and Accept return a net.Conn: a *Conn underneath.
//
// # Ending
//
// CloseWrite sends a fin: the peer's Reads return io.EOF after the bytes
// before it. Close sends one too, waits up to a second for the messages
// in flight, disconnects and gives the memory back; from the moment it
// begins, every call, waiting or new, ends with net.ErrClosed. When the
// peer disconnects or dies, the
// QP's work flushes and the next Read (after any fin and the bytes
// before it) or Write returns an error wrapping syscall.ECONNRESET.
//
// The wire format is in wire.go; docs/RDMANET.md describes the protocol
// and the memory it uses. On every system but Linux, Dial and Listen
// return an error wrapping errors.ErrUnsupported.
package rdmanet
