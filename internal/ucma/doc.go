// Package ucma is goverbs' kernel rdma_cm layer: one typed Go function per
// command of the kernel's user-space connection manager
// (drivers/infiniband/core/ucma.c), as internal/kverbs is for uverbs. The
// rdma_cm's device, /dev/infiniband/rdma_cm, takes write(2) only: each
// command is a struct rdma_ucm_cmd_hdr {cmd, in, out} and the command's
// body, and the kernel writes the response to the address in the body's
// response field. A [Conn] is one open fd (librdmacm's event channel); its
// methods are the commands: CreateID, DestroyID, BindIP, Bind, ResolveIP,
// ResolveAddr, ResolveRoute, QueryAddr, QueryPath, QueryGID, QueryRoute,
// Connect, Listen, Accept, Reject, Disconnect, InitQPAttr, GetEvent,
// SetOption, Notify, MigrateID, JoinMcast and LeaveMcast. [ABIVersion]
// says which ABI the kernel speaks, as librdmacm learns it.
//
// It sits below the rdma_cm's Go API and beside internal/kverbs: it
// imports uapi (the structs, generated from rdma_user_cm.h, and the event
// numbers, from librdmacm's rdma_cma.h), internal/errs and
// internal/netlink (for the ABI version). Addresses go in and out as
// net/netip values ([Sockaddr], [IPSockaddr]) and become the kernel's
// sockaddr_in, sockaddr_in6 or sockaddr_ib bytes here.
//
// # Memory
//
// Each command is built in a heap object that holds its request and its
// response: no Go stack address reaches the kernel. The control
// path takes them from a pool; GET_EVENT has its own, built once per Conn,
// so that GetEvent allocates nothing after warm-up.
//
// # Replies
//
// What the kernel writes back is read by pure functions of the bytes
// (parseEvent, parseAddrResp, parseRoute, parsePaths, parseQPAttr,
// parseSockaddr), which take any bytes without panicking: the fuzz
// targets hold them to it.
//
// # Errors
//
// A failed command returns an *errs.OpError whose Op names the command
// ("resolve addr") and whose Device is "rdma_cm", with the kernel's errno
// reachable through errors.Is. Input a command cannot carry (an address
// of the wrong family, more than 255 bytes of private data) is EINVAL
// before anything reaches the kernel. GetEvent's "no event queued" is one
// error value wrapping EAGAIN ([IsNoEvent]).
//
// # Lifetimes and concurrency
//
// A Conn owns its fd; closing it destroys every id on it. Its methods are
// safe for concurrent use, each holding a reference on the fd for its
// write, so Close never frees the number under a command. Waiting for
// events belongs to the caller: [Conn.SyscallConn]'s Read parks on the
// runtime's poller until the fd polls readable (an event is queued).
//
// Everything but the pure encoding and parsing is Linux-only; elsewhere
// [Open] and [ABIVersion] return errors wrapping errs.ErrNotSupported.
package ucma
