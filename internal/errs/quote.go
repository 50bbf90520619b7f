package errs

import "strconv"

// maxQuoted is the most of a caller's bad input an error message quotes.
const maxQuoted = 64

// Quote quotes s for an error message, as %q does, cut to its first 64
// bytes with its length said when it is longer: an error about a bad input
// names it without carrying all of it.
func Quote(s string) string {
	if len(s) <= maxQuoted {
		return strconv.Quote(s)
	}
	return strconv.Quote(s[:maxQuoted]) + "... (" + strconv.Itoa(len(s)) + " bytes)"
}
