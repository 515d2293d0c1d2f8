//go:build !windows

package fsutil

// transient is the test of a retryable rename error: off Windows, a rename is never
// retried (POSIX rename replaces a file other processes hold open).
var transient = func(error) bool { return false }
