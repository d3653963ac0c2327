package outcome

// Counts tallies lines by status. Unchanged counts the ok lines and the
// warn lines, which Warned counts again on their own; Failed counts the
// failed lines and any line of a status not known, as Of does.
type Counts struct {
	Unchanged, Changed, Removed, Failed int
	Warned                              int
}

// Tally counts lines by status.
func Tally(lines []Line) Counts {
	var c Counts
	for _, l := range lines {
		switch l.Status {
		case OK:
			c.Unchanged++
		case Warn:
			c.Unchanged++
			c.Warned++
		case Changed:
			c.Changed++
		case Removed:
			c.Removed++
		default:
			c.Failed++
		}
	}
	return c
}

// Eventful reports whether the lines say anything beyond "unchanged":
// something changed, was removed, failed or warned.
func (c Counts) Eventful() bool {
	return c.Changed+c.Removed+c.Failed+c.Warned > 0
}
