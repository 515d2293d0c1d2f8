/*
Package ledger stores ferry's append-only log: one segment file per (writer, device),
each line one signed entry, chained by hashes and stamped with a hybrid logical clock.
It knows lines, chains and clocks — not orders or agents; the fold that turns entries
into state lives in fsbus.

# Segments

A channel's ledger is the directory <channel>/ledger. Every (writer, device) pair owns
one segment, its chain, kept in its own files:

	ledger/<writer>/<device>.jsonl       epoch 0
	ledger/<writer>/<device>.<e>.jsonl   from the owner's checkpoint of epoch e on

[SegmentPath] and [EpochSegmentPath] are the one place the names are built,
[ParseSegmentName] the one place they are read. Once its caller has seen a counting
checkpoint ([Ledger.SetEpoch]) an append starts that epoch's file; seq and prev go on
across files and the older files are frozen (docs/format.md §21, ADR 0021). Writer and device are portable names
([ValidName]: 1–63 characters of [a-z0-9-], not starting with '-', no name Windows
reserves). Only that writer on that device ever appends to its segment (docs/design.md §2
rule 1), so a folder synchronised by Syncthing, Dropbox, OneDrive or git never sees two
machines write one file.

Readers list every file that ends in ".jsonl" under ledger/<any>/ and skip dot-files,
"*.tmp" and "*.torn-<n>" files. Conflict copies made by sync tools
("<device>.sync-conflict-<date>-<time>-<id>.jsonl", "<device> (1).jsonl", …) are read
like any segment: the writer and device inside each entry say whose record it is,
never the file name or the directory (rule 8). [ParseCopyName] tells people which sync
tool made a copy (`ferry doctor`); it is a hint, and nothing reads it as evidence.

# Lines

A segment is a sequence of lines, each the RFC 8785 canonical JSON form of one [Entry]
followed by a single "\n":

	{"data":{"basis":"sha256:…"},"device":"k3f9x2ab","hlc":"2026-11-29T18:30:00.123Z/0003","prev":"sha256:…","ref":"o-k3f9x2abq7mze","seq":42,"sig":"ed25519:…","type":"order.claim","v":1,"writer":"claude-code-laptop"}

Optional fields (prev, ref, data, idem) are omitted, never null. Readers accept any JSON
formatting of a line (a BOM, CRLF, spaces, another key order) because hashes and
signatures cover the canonical form, not the bytes (rule 9); blank lines are skipped.
Unknown fields are kept in the canonical form and so stay covered by hash and signature.

# Hash chain

seq counts 1, 2, 3, … within a segment. The entry hash is "sha256:" + lowercase hex of
the canonical form including sig ([Entry.Hash]). Every entry but the first names the
hash of its predecessor in prev; at seq 1 prev is omitted. The signature is ed25519 over
"ferry-entry-v1\n" + project id + "\n" + canonical form without sig
([Entry.SigningMessage]), so an entry cannot be replayed into another channel.

# Clock

hlc is a hybrid logical clock, "YYYY-MM-DDTHH:MM:SS.mmmZ/NNNN" in UTC, fixed width, so
text order is time order ([HLC], [NextHLC]). Within a segment hlc strictly increases
even when the wall clock steps back. A writer absorbs the HLCs it has read (the
observed argument of [Ledger.Append], usually [Snapshot.MaxHLC]) but never moves more
than [Options.MaxSkew] (default one hour) ahead of its own wall clock. Readers order
entries by (hlc, writer, device, seq), never by file time or arrival order.

# Appending

[Ledger.Append] takes the segment's machine-local lock (a [github.com/gofrs/flock] file
"seg-<writer>.<device>.lock" in [Options.LockDir], created on first use and never
deleted), repairs a torn tail, reads the segment's last complete entry backwards from
the end of the file (normally one line; lines of other segments found there are kept
but skipped), builds and signs the next entry, writes the whole line with one write on a
file opened O_APPEND, fsyncs it (and the directory when the file is new) and unlocks.
A crash therefore leaves at most one incomplete line, always the last.

# Torn tails

A last line without "\n", or a run of NUL bytes (what some file systems show after a
crash when the size reached disk but the data did not), is a line that has not yet
arrived: readers stop there and report [KindTorn], which is not an error. Before its
next append the segment's own writer moves every byte after the last complete,
parsable line to "<device>.torn-<n>" beside the segment (n = 1, 2, … the first unused),
fsyncs it, and only then truncates the segment to that line and fsyncs
([Ledger.Repair]). Bytes are never deleted without a copy. A crash during a repair can
leave a partial or a second copy in a .torn-<n> file, never a cut segment without a
whole copy (TestCrashSafety kills writers there).

A complete line that is not a valid entry is reported as [KindMalformed] with its line
number and skipped; the lines around it still count.

A NUL byte followed later in the file by data is a hole, not a torn tail: readers stop
there too but report [KindHole], a problem, since the records after it are hidden.

# Writer continuity

A writer's next entry follows the tip of its own chain as readers keep it — resolved
from every *.jsonl file of its writer directory, fork winner included — not the last
line of its segment. [Ledger.Restore] makes the segment hold that whole chain: it moves
everything from the first unreadable byte to a .torn-<n> file, re-appends verbatim the
kept records the segment lacks (found in conflict copies or after a hole) and reports
in [Restored].Missing the seqs below the tip that no file holds.
[Ledger.Append] runs it itself when the writer directory holds a conflict copy; callers
that see a fork, hole or malformed line of the writer's chain in their reading call it
first (docs/adr/0007-writer-continuity.md).

# Merging and forks

[Ledger.Read] merges every segment file into one [Snapshot]. Records are deduplicated
by (writer, device, seq, hash), so a segment that arrives twice (a conflict copy, a
restored backup) counts once. Each (writer, device) chain is then walked upward by seq:
at each seq the record whose prev names the chain's current tip is taken (the lowest
hash if several do); when none does, or seqs are missing, the lowest-hash record is
taken and [KindBrokenChain] reported.

Two different records with one (writer, device, seq) are a fork — a cloned machine, a
restored backup. The winning branch (prev names the tip; lowest hash among those) keeps
its records and the records chained after it by prev; every record of the other
branches, and every record chained after them, is left out of the snapshot and listed in
a [Fork], never silently dropped. The result depends only on the set of records, not on
file names or the order files are read in.

# Verifying

[Ledger.Verify] reports everything Read does plus, for every record, [KindUnknownKey]
when no key is bound to its writer and [KindBadSignature] when the signature does not
verify. Records with bad signatures are set aside before chains are resolved, so a
forged record can never win a fork against a signed one ([Ledger.ReadVerified]).

See docs/format.md for the normative description of the format and docs/design.md §2 for why
each rule exists.
*/
package ledger
