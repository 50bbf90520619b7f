package uverbs

// SetQPCmdHook makes QP.Modify and QP.Query call f after they have
// checked that the QP is open and before they send their command. It
// returns the function that removes it.
func SetQPCmdHook(f func()) (restore func()) {
	testQPCmdHook = f
	return func() { testQPCmdHook = nil }
}
