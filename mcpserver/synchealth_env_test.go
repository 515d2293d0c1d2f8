package mcpserver_test

import (
	"os"
	"path/filepath"

	"github.com/ferryhq/ferry/fsbus"
)

// The figures and transcripts of this package must not depend on a Syncthing of the
// machine running the tests (ferry_join and ferry_primary status report sync health,
// issue 7): Syncthing's config is looked for only in a directory that does not exist,
// and no API is named in the environment.
func init() {
	os.Setenv("STHOMEDIR", filepath.Join(os.TempDir(), "ferry-tests-no-syncthing", "none"))
	os.Unsetenv("STCONFDIR")
	os.Unsetenv(fsbus.EnvSyncthingURL)
	os.Unsetenv(fsbus.EnvSyncthingKey)
}
