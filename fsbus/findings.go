package fsbus

// findings fills out.Findings, out.Copies and the counts of errors and warnings: the
// one list of findings `ferry ledger verify` and `ferry doctor` both report (Doctor
// starts its report with them, then adds the DoctorOnlyChecks). In this order: a git
// operation stopped in the repository holding the channel (its conflict markers
// explain the damage they cause, which is then not reported again), the ledger's
// problems, forks, lost appends and ignored entries, rival creates, links and key
// changes, torn tails moved aside, conflict copies of segments (merged or not) with the
// records found only in a copy readers do not merge, other writers' lines inside a
// segment, vanished records, and objects that are wrong, edited or a sync tool's copy.
// An error means something counts for nothing or can be lost; a warning needs
// attention; info needs nothing done. It returns an error only when the ledger
// directory cannot be read.
func (c *Channel) findings(v *View, out *VerifyReport) error {
	r := &DoctorReport{Findings: []Finding{}, Copies: []ConflictCopy{}}
	marked := c.doctorGit(r)
	c.doctorLedger(r, v, out, marked)
	doctorKeyChanges(r, out) // forgery.go
	if err := c.doctorCopies(r, v, out); err != nil {
		return err
	}
	c.doctorShrunk(r, out) // an error, once per writer (vanished.go)
	c.objectFindings(r, v, out)
	out.Findings, out.Copies, out.Errors, out.Warnings = r.Findings, r.Copies, r.Errors, r.Warnings
	return nil
}
