package rdmanet

import "time"

// Config sizes a connection's registered memory and says how it waits.
// The zero value is the defaults; Dialer and ListenConfig take one.
type Config struct {
	// BufferSize is the bytes of each receive the connection posts, and
	// of each send buffer: the most one message carries. Default 16 KiB.
	BufferSize int
	// ReadBuffers is how many receives the connection keeps posted for
	// its peer, WriteBuffers how many messages it has in flight at most.
	// Each defaults to 8, so a connection registers 256 KiB by default:
	// (ReadBuffers + WriteBuffers) × BufferSize. ReadBuffers is at
	// least 2: one stays for credit messages.
	ReadBuffers, WriteBuffers int
	// BusyPoll, when positive, makes a Read or Write that has to wait
	// poll the completion queue for up to that long before it parks:
	// lower latency for a CPU spent spinning.
	BusyPoll time.Duration
}

const (
	defaultBufferSize = 16 << 10
	defaultBuffers    = 8
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
		d.ReadBuffers = defaultBuffers
	}
	d.ReadBuffers = min(max(d.ReadBuffers, 2), maxCredits)
	if d.WriteBuffers <= 0 {
		d.WriteBuffers = defaultBuffers
	}
	return d
}
