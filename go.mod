module github.com/goverbs/goverbs

go 1.24.0

require (
	github.com/google/go-cmp v0.7.0 // indirect
	golang.org/x/sys v0.41.0 // indirect
)
