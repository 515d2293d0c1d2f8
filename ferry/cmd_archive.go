package main

// ArchiveCmd groups the commands on the channel's archive/ (docs/format.md §21).
type ArchiveCmd struct {
	Move ArchiveMoveCmd `cmd:"" help:"Take archive/ out of the synced folder, into DIR (owner only)."`
}

// ArchiveMoveCmd is `ferry archive move DIR`.
type ArchiveMoveCmd struct {
	Dir string `arg:"" help:"A folder outside the channel folder; created when missing." placeholder:"DIR"`
}

// Help is the long help.
func (c *ArchiveMoveCmd) Help() string {
	return "Moves the ledger files in the channel's archive/ — frozen files the owner's\n" +
		"checkpoint covers, moved there whole — into DIR/ledger/, outside the channel\n" +
		"folder, so they leave every machine the folder syncs to. Each file is copied,\n" +
		"fsynced, read back and compared before it is removed from archive/. A file the\n" +
		"newest counting checkpoint's cut does not cover, or archived less than\n" +
		"policy.archive_grace_s ago, stays and is listed. Nothing moves while a dispute of\n" +
		"the checkpoint stands. Keep DIR: `ferry ledger verify --archive DIR` checks every\n" +
		"chain from its first entry with it."
}

// ownerAction marks archive move the owner's (docs/format.md §13, the master row).
func (c *ArchiveMoveCmd) ownerAction(*Globals) string { return "take the archive out of the folder" }

// Run implements the command.
func (c *ArchiveMoveCmd) Run(g *Globals) error {
	s, err := g.Master()
	if err != nil {
		return err
	}
	moved, refused, err := s.ArchiveMove(c.Dir)
	if err != nil && len(moved) == 0 {
		return err
	}
	if g.JSON {
		if moved == nil {
			moved = []string{}
		}
		if refused == nil {
			refused = []string{}
		}
		if perr := g.printJSON(map[string][]string{"moved": moved, "refused": refused}); perr != nil {
			return perr
		}
		return err
	}
	for _, m := range moved {
		g.printf("moved   %s\n", m)
	}
	for _, r := range refused {
		g.printf("stays   %s\n", r)
	}
	stay := "stay"
	if len(refused) == 1 {
		stay = "stays"
	}
	g.printf("✔ %s moved out of the folder, %s %s\n", plural(len(moved), "file", "files"), plural(len(refused), "file", "files"), stay)
	return err
}
