// Package cqseam is the seam between package cq, which users hold, and
// what lies below it: uverbs, which makes a CQ's kernel object, and the
// providers, whose rings a CQ polls. Nothing here is for users, so
// nothing here is in cq's API.
//
// It holds the CQ's lock and error word that a provider's ring follows
// when it polls (RingLock), what a CQ's kernel object is made from
// (Request), and the functions package cq sets when it is initialised so
// that uverbs can make CQs and channels and reach into them (hooks.go).
// Values of cq's types cross the hooks as any: cqseam cannot name them,
// since cq imports it.
package cqseam
