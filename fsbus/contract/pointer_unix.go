//go:build unix

package contract

import (
	"os"
	"syscall"
)

// openPointerFlags opens a pointed file without blocking: a FIFO swapped in after the
// Stat that refuses one opens at once and is then refused.
const openPointerFlags = os.O_RDONLY | syscall.O_NONBLOCK
