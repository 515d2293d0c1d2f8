package fsbus

import (
	"path/filepath"

	"github.com/ferryhq/ferry/internal/sessionlease"
)

// SessionLeasePath is the lock file of agent's MCP session lease in project
// (internal/sessionlease). It lives under ConfigDir, not CacheDir: users purge caches,
// and a purge must not let a second session in.
func (h *Home) SessionLeasePath(project, agent string) string {
	return filepath.Join(h.ConfigDir, "leases", project, "agent-"+agent+".lease")
}

// TakeSessionLease takes agent's MCP session lease in project without waiting
// (sessionlease.Take): a nil lease and holder naming the process when another holds it.
func (h *Home) TakeSessionLease(project, agent string) (*sessionlease.Lease, string, error) {
	return sessionlease.Take(h.SessionLeasePath(project, agent), func(msg string) { h.warn("", msg) })
}

// SessionLeaseHolder reports whether a live process on this machine holds agent's MCP
// session lease in project, and names it (sessionlease.Holder).
func (h *Home) SessionLeaseHolder(project, agent string) (holder string, held bool) {
	return sessionlease.Holder(h.SessionLeasePath(project, agent))
}
