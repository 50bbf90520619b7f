// Package apisurface holds no code: its tests hold goverbs' public
// packages to one exported API on every GOOS and GOARCH goverbs builds for,
// and every package to the package graph of docs/ARCHITECTURE.md
// (TestLayers: what each library package may import, no dependency but
// x/sys and go-cmp, no cgo).
//
// goverbs runs on Linux only, but a program that uses it must also build
// on darwin and windows, where every entry point returns an error wrapping
// ErrNotSupported. So each exported name a *_linux.go file declares needs
// its twin, of the same signature, in a *_other.go (//go:build !linux)
// stub, or in an untagged file both share. The test reads the sources with
// go/build and go/parser for each target and compares what they export:
// a Linux-only exported function, method, type, field, constant or
// variable without its stub fails it, and so does a stub whose signature
// differs.
//
// TestGoldenAPI holds the exported API of every public package (each
// package of the module but internal ones, uapi, commands, examples and
// test suites: notGolden says why each is left out) to testdata/api.txt,
// so that a change of it is an edit seen in review.
// TestGoldenCoversEveryPackage fails on a package that is neither golden
// nor left out. TestDocsDoNotSendUsersToUAPI fails on a public package
// whose docs say "uapi.": uapi mirrors the kernel and promises nothing,
// so the public API is documented in its own names.
package apisurface
