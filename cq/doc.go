// Package cq will implement completion queues: creating and destroying
// them, polling work completions into caller-owned memory without
// allocating, arming them for the next or the next solicited completion,
// and waiting for completion events on a channel that serves many CQs,
// parked on the Go runtime poller rather than an OS thread, with context
// cancellation.
//
// It is empty so far.
package cq
