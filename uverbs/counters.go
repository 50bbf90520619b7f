package uverbs

// Counter is one of a port's hardware counters: the driver's name for it
// ("sent_pkts", "rcvd_pkts", "retry_exceeded_err" on rxe) and its value
// when read.
type Counter struct {
	Name  string
	Value uint64
}
