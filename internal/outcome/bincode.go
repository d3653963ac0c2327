package outcome

import "github.com/muster-tool/muster/internal/bincode"

// MinLineBytes is the fewest bytes AppendLines writes for a line: its ID,
// status, detail and digest, each at least a length.
const MinLineBytes = 4

// AppendLines writes lines to a cache: their count, then each line's ID,
// status, detail and digest. ReadLines reads them back.
func AppendLines(e *bincode.Encoder, ls []Line) {
	e.Uint(uint64(len(ls)))
	for i := range ls {
		l := &ls[i]
		e.Str(l.ID)
		e.Str(string(l.Status))
		e.Str(l.Detail)
		e.Str(l.Digest)
	}
}

// ReadLines reads lines AppendLines wrote; none is nil.
func ReadLines(d *bincode.Decoder) []Line {
	n := d.Count(MinLineBytes)
	if n == 0 {
		return nil
	}
	ls := make([]Line, n)
	for i := range ls {
		l := &ls[i]
		l.ID = d.Str()
		l.Status = Status(d.Str())
		l.Detail = d.Str()
		l.Digest = d.Str()
	}
	return ls
}
