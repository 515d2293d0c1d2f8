// Package procgroup starts a child process in a process group of its own and ends
// that group, the one rule `ferry run` (a run's file, docs/runs.md) and the MCP
// gateway (its stdio servers, docs/mcp.md) share:
//
//	procgroup.Set(cmd) // before cmd.Start
//	...
//	_ = procgroup.Interrupt(cmd.Process) // ask the group to stop
//	_ = procgroup.Kill(cmd.Process)      // end whatever is left of it
//
// On unix [Set] makes the child lead a new process group (setpgid), so [Interrupt]
// (SIGINT) and [Kill] (SIGKILL) reach every process it started: a wrapper script's
// children, npx's node, a `sleep &` left behind. On Linux the kernel also sends the
// child SIGKILL when its parent dies (Pdeathsig), even by SIGKILL; only the child
// gets it, not what the child started. Elsewhere a ferry killed with SIGKILL leaves
// the child running.
//
// On Windows [Set] starts the child in a new process group (CREATE_NEW_PROCESS_GROUP),
// so a console Ctrl-C meant for ferry does not reach it directly: ferry decides when
// it stops. Its own children are not tracked (no job object): [Interrupt] and [Kill]
// kill the child alone, and the caller's exec.Cmd.WaitDelay bounds how long those
// children can hold its output pipes.
//
// [Alive] tells whether a pid names a running process: a run's supervisor, which the
// run registry checks beside its flock (docs/runs.md "Dead workers").
package procgroup
