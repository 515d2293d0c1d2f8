package fsbus

import "runtime/debug"

// The tests collect garbage at a quarter of the default pace (GOGC=400): each test's
// channel is small and short-lived, and a fifth of the package's CPU time went to the
// collector. It changes nothing a test checks.
func init() { debug.SetGCPercent(400) }
