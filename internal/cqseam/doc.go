// Package cqseam is the seam between package cq, which users hold, and
// what lies below it: uverbs, which makes a CQ's kernel object, and the
// providers, whose rings a CQ polls. Nothing here is for users, so
// nothing here is in cq's API.
//
// It holds the CQ's lock and error word that a provider's ring follows
// when it polls (RingLock), what a CQ's kernel object is made from
// (Request), what cq asks of the kernel and provider side of a CQ
// (Backend, Ring), and the functions package cq registers when it is
// initialised so that uverbs can make CQs and channels and reach into
// them (Hooks). cqseam cannot name cq's types, since cq imports it, so
// those types are its type parameters: cq registers Hooks instantiated
// with its own, and uverbs, naming the same, gets them typed.
package cqseam
