// Package rdmacm connects RDMA queue pairs by IP address and port, as
// librdmacm does, over the kernel's connection manager
// (/dev/infiniband/rdma_cm) with no cgo: on rxe (soft-RoCE), RoCE and
// InfiniBand devices alike.
//
// # Connections
//
// [Dial] and [Listen] are its net.Dial and net.Listen: an address
// ("192.0.2.1:7471", "[2001:db8::1]:7471", "[fe80::1%eth0]:7471"; an
// IPv4-mapped IPv6 address is its IPv4 one, and a listener on "[::]"
// takes both families) on an RDMA device's netdev, a context that bounds
// the whole setup, and a [*Conn] holding a reliable-connected QP in RTS,
// the CQ its queues share with a completion channel, and the PD to
// register memory on (package uverbs and cq do the rest).
// [Listener.Accept] accepts with the listener's [Config];
// [Listener.AcceptRequest] hands over the [Request] first, to read its
// private data and [Request.Accept] or [Request.Reject] it.
//
//	l, err := rdmacm.Listen(ctx, "192.0.2.1:7471", nil)
//	conn, err := l.Accept(ctx)                        // on one side
//	conn, err := rdmacm.Dial(ctx, "192.0.2.1:7471", nil) // on the other
//
// The process's connections share one rdma_cm channel, open while any
// connection is, and one goroutine reads it for them all: a connection
// costs neither a file nor a goroutine of its own, as a librdmacm
// program's IDs share its one channel. Each Listener reads its requests
// on a channel and goroutine of its own; an accepted connection's ID
// moves to the shared channel, so a Conn outlives its Listener. When the
// peer disconnects, the Conn's QP goes to the error state (posted work
// flushes once) and [Conn.Disconnected] closes. [Conn.Close] disconnects,
// waits at most Config.CloseWait for the peer's answer (rxe's CM would
// otherwise wait about 100 s) and destroys the QP, CQ and ID. A Conn
// makes its own CQ and completion channel, unless Config.CQ gives one
// that many connections share.
//
// # Datagrams
//
// [DialUD] and [ListenUD] do the same for UD in RDMA_PS_UDP (a SIDR
// exchange): a [*UDConn] holds a UD QP in RTS with its CQ, channel and
// PD. The side that dialed gets the peer's QP number, Q_Key and an AH
// built from the event's address vector ([UDConn.Peer]), ready for
// uverbs.SendWR{AH, RemoteQPN, RemoteQKey}; the side that accepted learns
// its peer from the first datagram ([UDConn.ReplyTo]), since the request
// carries no QP number. Receives need uverbs.GRHSize bytes of room
// before the payload.
//
// [JoinMulticast] joins an IP multicast group: its UDConn's QP receives
// what is sent to the group, and its Peer is the group, to send to every
// member; [UDConn.Leave] (or Close) leaves.
//
// # The low level
//
// [EventChannel], [ID] and [Event] are librdmacm's rdma_event_channel,
// rdma_cm_id and rdma_cm_event, for programs that drive the steps
// themselves: bind or resolve, listen or connect, accept or reject, with
// events read by [EventChannel.Wait] (parked on the Go runtime's poller,
// honouring a context; no OS thread blocked) or [EventChannel.TryWait]
// (no allocation after warm-up), each acknowledged with [Event.Ack]. An
// ID given a QP by [ID.AttachQP] drives it as librdmacm does: INIT from
// the CM's attributes, RTR and RTS before ACCEPT on the passive side and
// on CONNECT_RESPONSE on the active side (reported as ESTABLISHED), the
// error state on failures.
//
// # Devices
//
// The address says which device a connection uses: the kernel reports
// its node GUID and index, and the package opens it once per process (a
// uverbs.Context and PD shared by every ID and Conn on it, closed with
// the last), unless Config.PD gives one.
//
// # Errors
//
// Every error is an [*OpError] naming the step ("resolve addr",
// "connect", "accept") and the address, wrapping the cause: the errno,
// a [*RejectError] (errors.Is(err, syscall.ECONNREFUSED)) with the
// peer's reject reason and private data, the context's error (a
// deadline's also wraps os.ErrDeadlineExceeded), or [ErrClosed] after
// Close. Private data longer than a message carries is EINVAL before
// anything is sent (MaxConnectPrivateDataTCP and the others).
//
// # Left out
//
// AF_IB addressing, rdma_getaddrinfo, ECE, and IPv6 multicast groups
// on RoCE v2 ports, which the kernel does not join: docs/RDMACM.md.
// (A server's connections share an SRQ the caller makes: Config.SRQ.) On
// every system but Linux each call returns an error wrapping
// [ErrNotSupported].
//
// # Concurrency
//
// Every type is safe for concurrent use; see each for what waits on what.
package rdmacm
