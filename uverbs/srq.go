package uverbs

// SRQConfig describes a shared receive queue (struct ibv_srq_init_attr):
// one ring of receives that many QPs take from, so that a server's
// receive memory does not grow with its connections.
type SRQConfig struct {
	// MaxWR is how many receives the SRQ holds at least, MaxSGE how many
	// SGEs each may have (at least 1).
	MaxWR, MaxSGE uint32
	// Limit arms the limit event (EventSRQLimitReached) at creation: it
	// fires once the SRQ holds fewer than Limit receives. 0 leaves it
	// unarmed; SRQ.Arm arms it later, and again after it fired.
	Limit uint32
	// UserValue is a value of the caller's, kept with the SRQ (UserValue).
	UserValue uint64
}

// SRQAttr is what SRQ.Query returns (struct ibv_srq_attr): the SRQ's size,
// its SGEs per receive, and the limit armed (0 once the event fired, or
// before the SRQ was armed).
type SRQAttr struct {
	MaxWR, MaxSGE, Limit uint32
}
