// Package cqhook lets uverbs run a provider's cleanup of a CQ's ring
// exclusive of the CQ's Poll, without a public API for it: package cq
// sets Exclusive when it is initialised. mlx5 needs it when a QP is reset,
// to take the QP's stale completions out of its CQs, as rdma-core does.
package cqhook

// Exclusive runs f while no Poll, ReqNotify or Resize of q (a *cq.CQ) can
// run. It does nothing for another type.
var Exclusive func(q any, f func())
