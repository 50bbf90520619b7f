// Package wide builds on 64-bit targets only.
package wide

// Big needs a 64-bit int.
var Big int = 1 << 40
