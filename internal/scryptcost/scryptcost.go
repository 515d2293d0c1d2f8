// Package scryptcost holds the scrypt work factor of ferry's passphrase-encrypted key
// files, age's scrypt recipient: a locked key (docs/format.md §18) and the file `ferry
// key export` writes.
//
// Every build encrypts with Default. A test of a package that locks or exports keys
// may lower it for its own process with SetForTests, called only from _test.go files,
// so a release build never can: the file format is the same, and age reads log2 N back
// from each file's header, so a file of either cost decrypts alike. ferry's
// TestReleaseBinaryLocksAtFullCost builds the binary and reads the header it writes.
package scryptcost

import (
	"fmt"
	"sync/atomic"
)

// Default is log2 N of the scrypt cost: age's default, 18, about a second of CPU and
// 256 MiB of memory for each lock, unlock, export and import.
const Default = 18

// lowered is the work factor SetForTests set; 0 means Default.
var lowered atomic.Int32

// WorkFactor returns log2 N for the next key file this process encrypts.
func WorkFactor() int {
	if n := lowered.Load(); n != 0 {
		return int(n)
	}
	return Default
}

// SetForTests makes every later encryption of this process use log2 N = logN, which
// must be from 1 to Default. Only tests call it, to make locking a key cheap.
func SetForTests(logN int) {
	if logN < 1 || logN > Default {
		panic(fmt.Sprintf("scryptcost: work factor %d is not from 1 to %d", logN, Default))
	}
	lowered.Store(int32(logN))
}
