// Package arrivals is this machine's arrival log of a channel directory: the local
// arrival number and first-seen time of every entry this machine has read, the
// cursors that name them, and the sightings of each writer (docs/design.md §2 "The
// local arrival log, cursors and sightings"). Stamp is the pair of clocks — wall and
// boot — an arrival is stamped with, so a clock step is told from time passing
// (ADR 0013). The façade ingests each Load's entries (Ingest) under the log's flock;
// the fold checkpoint carries the log as last read (Append, Decode). It reads and
// appends one machine-local file, never the channel.
package arrivals
