package rdmanet

import "time"

// Config sizes a connection's registered memory and says how it waits.
// The zero value is the defaults; Dialer and ListenConfig take one.
type Config struct {
	// BufferSize is the size of a slot, the unit the registered memory is
	// counted in. Default 4 KiB.
	BufferSize int
	// ReadBuffers is the slots of the read ring, which the peer writes
	// the stream's bytes into; WriteBuffers the slots of the write
	// buffers, which this side's messages go from. A message takes at
	// least one slot of each, at most half of either, so small
	// messages are many in flight and large ones go 32 KiB at once. They
	// default to 32 and 16, so a connection registers 192 KiB by default:
	// (ReadBuffers + WriteBuffers) × BufferSize. ReadBuffers is at least
	// 2: one slot's credit stays for credit and fin messages.
	ReadBuffers, WriteBuffers int
	// BusyPoll, when positive, makes a Read or Write that has to wait
	// poll the completion queue for up to that long before it parks:
	// lower latency for a CPU spent spinning.
	BusyPoll time.Duration
}

const (
	defaultBufferSize   = 4 << 10
	defaultReadBuffers  = 32
	defaultWriteBuffers = 16
)

func (c *Config) withDefaults() Config {
	var d Config
	if c != nil {
		d = *c
	}
	if d.BufferSize <= 0 {
		d.BufferSize = defaultBufferSize
	}
	if d.ReadBuffers <= 0 {
		d.ReadBuffers = defaultReadBuffers
	}
	d.ReadBuffers = min(max(d.ReadBuffers, 2), maxCredits)
	if d.WriteBuffers <= 0 {
		d.WriteBuffers = defaultWriteBuffers
	}
	return d
}
