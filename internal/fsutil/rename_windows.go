//go:build windows

package fsutil

// transient is the test of a retryable rename error: on Windows, access denied,
// sharing violation and lock violation.
var transient = isWindowsTransient
