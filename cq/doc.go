// Package cq implements completion queues: the queues an RDMA device
// reports finished work requests on, and the completion channels that
// deliver "this CQ has something" events.
//
// A CQ is created by a device context (uverbs.Context.NewCQ), optionally
// attached to a [Channel] (uverbs.Context.NewCompChannel), which one or
// many CQs share; an event names its CQ through a handle table, never a
// raw pointer.
//
// Polling, arming (ReqNotify) and waiting for events on a channel follow
// with the providers' rings.
//
// # Lifetimes
//
// Close a CQ before its channel: closing a channel that a CQ still uses
// fails with EBUSY, as ibv_destroy_comp_channel does.
package cq
