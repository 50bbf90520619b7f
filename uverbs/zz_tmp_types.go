package uverbs

// TEMPORARY until gid.go/query_linux.go land.

// GID is a 128-bit global identifier.
type GID [16]byte

// MTU is an IB MTU enum value.
type MTU uint8
