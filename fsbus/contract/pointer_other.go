//go:build !unix

package contract

import "os"

// openPointerFlags: without O_NONBLOCK, the Stat before the open refuses what is not a
// regular file.
const openPointerFlags = os.O_RDONLY
