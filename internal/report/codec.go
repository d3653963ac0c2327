package report

import (
	"bytes"
	"crypto/sha256"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/tomlfile"
)

// A report's TOML is written and read by hand: the mesh reads every report
// of every host, and decoding them by reflection cost more than decrypting
// them. Marshal writes one canonical spelling, the one BurntSushi/toml's
// encoder gives a Report whose times are in UTC, so reports written before
// this codec existed mostly read on the fast path too. Unmarshal reads that
// spelling directly and hands anything else a TOML decoder may accept
// (another writer's spacing, a newer muster's keys) to the strict decoder
// every bundle payload goes through. The fast path takes a document only
// if Marshal of what it read gives back the same bytes, so it changes how
// fast a report is read, never what is read or refused.

// Marshal encodes r as canonical TOML. Times are written in UTC, with as
// many fractional digits as they need; a time outside the years 0 to 9999
// has no TOML spelling and makes a document no decoder accepts. Bytes of a
// string that are not UTF-8 are written as U+FFFD, as TOML holds only
// UTF-8.
func Marshal(r *Report) []byte {
	return appendReport(make([]byte, 0, marshalSize(r)), r)
}

// Said is the digest of what r says, apart from when the run was: its
// encoding with Start and End left out. Two reports with the same Said
// tell the mesh the same thing about the same node. The encoding is
// hashed as it is made, a few KiB at a time: a report of many thousand
// lines is never in memory whole.
func Said(r *Report) [32]byte {
	c := *r
	c.Start, c.End = time.Time{}, time.Time{}
	h := sha256.New()
	// A small report's buffer is its size: a 64 KiB one costs a short
	// run the page faults of memory it never uses.
	b := make([]byte, 0, min(64<<10, marshalSize(&c)))
	flush := func() {
		if len(b) >= 32<<10 {
			h.Write(b)
			b = b[:0]
		}
	}
	b = appendHead(b, &c)
	for i := range c.Lines {
		b = appendLine(b, &c.Lines[i])
		flush()
	}
	for i := range c.Ledger {
		b = appendEntry(b, &c.Ledger[i])
		flush()
	}
	h.Write(b)
	return [32]byte(h.Sum(nil))
}

// marshalSize estimates Marshal's output, to allocate it once.
func marshalSize(r *Report) int {
	n := 256 + len(r.Node) + len(r.NodeID) + len(r.Muster) + len(r.Commit)
	for _, s := range r.Notes {
		n += len(s) + 4
	}
	for _, l := range r.Lines {
		n += 64 + len(l.ID) + len(l.Status) + len(l.Detail) + len(l.Digest)
	}
	for _, e := range r.Ledger {
		n += 96 + len(e.ID) + len(e.Kind) + len(e.Path) + len(e.Name) + len(e.Digest)
	}
	return n
}

func appendReport(b []byte, r *Report) []byte {
	b = appendHead(b, r)
	for i := range r.Lines {
		b = appendLine(b, &r.Lines[i])
	}
	for i := range r.Ledger {
		b = appendEntry(b, &r.Ledger[i])
	}
	return b
}

// appendHead appends everything before the lines.
func appendHead(b []byte, r *Report) []byte {
	b = append(b, "version = "...)
	b = strconv.AppendInt(b, int64(r.Version), 10)
	b = tomlfile.AppendString(append(b, "\nnode = "...), r.Node)
	b = tomlfile.AppendString(append(b, "\nnode_id = "...), r.NodeID)
	b = strconv.AppendUint(append(b, "\ngeneration = "...), r.Generation, 10)
	b = appendTime(append(b, "\nstart = "...), r.Start)
	b = appendTime(append(b, "\nend = "...), r.End)
	b = tomlfile.AppendString(append(b, "\nmuster = "...), r.Muster)
	b = strconv.AppendUint(append(b, "\nnewest_seen = "...), r.NewestSeen, 10)
	b = append(b, '\n')
	if r.Commit != "" {
		b = tomlfile.AppendString(append(b, "commit = "...), r.Commit)
		b = append(b, '\n')
	}
	// An empty but present list of lines is an empty array; absent
	// (nil), it is no key at all.
	if r.Lines != nil && len(r.Lines) == 0 {
		b = append(b, "line = []\n"...)
	}
	if len(r.Notes) > 0 {
		b = append(b, "notes = ["...)
		for i, n := range r.Notes {
			if i > 0 {
				b = append(b, ", "...)
			}
			b = tomlfile.AppendString(b, n)
		}
		b = append(b, "]\n"...)
	}
	return b
}

func appendLine(b []byte, l *outcome.Line) []byte {
	b = tomlfile.AppendString(append(b, "\n[[line]]\n  id = "...), l.ID)
	b = tomlfile.AppendString(append(b, "\n  status = "...), string(l.Status))
	b = append(b, '\n')
	b = appendOptional(b, "  detail = ", l.Detail)
	return appendOptional(b, "  digest = ", l.Digest)
}

func appendEntry(b []byte, e *ledger.Entry) []byte {
	b = tomlfile.AppendString(append(b, "\n[[ledger]]\n  id = "...), e.ID)
	b = tomlfile.AppendString(append(b, "\n  type = "...), string(e.Kind))
	b = append(b, '\n')
	b = appendOptional(b, "  path = ", e.Path)
	b = appendOptional(b, "  name = ", e.Name)
	b = appendOptional(b, "  digest = ", e.Digest)
	if e.Created {
		b = append(b, "  created = true\n"...)
	}
	return b
}

// appendOptional appends the line key+s unless s is empty (omitempty).
func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return append(tomlfile.AppendString(append(b, key...), s), '\n')
}

func appendTime(b []byte, t time.Time) []byte {
	return t.UTC().AppendFormat(b, time.RFC3339Nano)
}

// Unmarshal decodes a report's TOML payload. A payload in the canonical
// form Marshal writes is read directly; any other is decoded strictly as
// every bundle payload is, refusing keys a Report has no field for.
func Unmarshal(p []byte) (*Report, error) {
	return UnmarshalPayload(p, bundle.Context{Kind: "report"})
}

// UnmarshalPayload is Unmarshal for the payload of the bundle c, which
// errors name.
func UnmarshalPayload(p []byte, c bundle.Context) (*Report, error) {
	if r, ok := unmarshalCanonical(p); ok {
		return r, nil
	}
	var r Report
	if err := bundle.DecodeTOMLStrict(p, c, &r); err != nil {
		return nil, err
	}
	return &r, nil
}

// unmarshalCanonical reads p if it is exactly what Marshal writes, and
// reports whether it was.
func unmarshalCanonical(p []byte) (*Report, bool) {
	d := decoder{s: string(p), ok: true}
	r := d.report()
	if !d.ok || d.i != len(d.s) {
		return nil, false
	}
	// What was read must be written back byte for byte: that makes any
	// spelling the parse below is lenient about (a "+" sign, a zone
	// offset, an escape for a printable character) fall back.
	buf := rewritten.Get().(*[]byte)
	*buf = appendReport((*buf)[:0], r)
	same := bytes.Equal(*buf, p)
	rewritten.Put(buf)
	if !same {
		return nil, false
	}
	return r, true
}

// rewritten holds buffers for unmarshalCanonical's check.
var rewritten = sync.Pool{New: func() any { return new([]byte) }}

// decoder reads the canonical form. Its first failure clears ok; every
// read after that is a no-op.
type decoder struct {
	s  string
	i  int
	ok bool
}

func (d *decoder) report() *Report {
	r := &Report{}
	d.lit("version = ")
	r.Version = int(d.int(strconv.IntSize))
	d.lit("\nnode = ")
	r.Node = d.str()
	d.lit("\nnode_id = ")
	r.NodeID = d.str()
	d.lit("\ngeneration = ")
	r.Generation = d.uint()
	d.lit("\nstart = ")
	r.Start = d.time()
	d.lit("\nend = ")
	r.End = d.time()
	d.lit("\nmuster = ")
	r.Muster = d.str()
	d.lit("\nnewest_seen = ")
	r.NewestSeen = d.uint()
	d.lit("\n")
	r.Commit = d.optional("commit = ")
	if n := strings.Count(d.s[d.i:], "\n[[line]]\n"); n > 0 {
		r.Lines = make([]outcome.Line, 0, n)
	}
	if n := strings.Count(d.s[d.i:], "\n[[ledger]]\n"); n > 0 {
		r.Ledger = make([]ledger.Entry, 0, n)
	}
	if d.next("line = []\n") {
		r.Lines = []outcome.Line{}
	}
	if d.next("notes = [") {
		for d.ok {
			r.Notes = append(r.Notes, d.str())
			if !d.next(", ") {
				break
			}
		}
		d.lit("]\n")
	}
	for d.ok && d.next("\n[[line]]\n  id = ") {
		var l outcome.Line
		l.ID = d.str()
		d.lit("\n  status = ")
		l.Status = outcome.Status(d.str())
		d.lit("\n")
		l.Detail = d.optional("  detail = ")
		l.Digest = d.optional("  digest = ")
		r.Lines = append(r.Lines, l)
	}
	for d.ok && d.next("\n[[ledger]]\n  id = ") {
		var e ledger.Entry
		e.ID = d.str()
		d.lit("\n  type = ")
		e.Kind = resource.Kind(d.str())
		d.lit("\n")
		e.Path = d.optional("  path = ")
		e.Name = d.optional("  name = ")
		e.Digest = d.optional("  digest = ")
		e.Created = d.next("  created = true\n")
		r.Ledger = append(r.Ledger, e)
	}
	return r
}

// next consumes lit if the input continues with it.
func (d *decoder) next(lit string) bool {
	if !d.ok || !strings.HasPrefix(d.s[d.i:], lit) {
		return false
	}
	d.i += len(lit)
	return true
}

// lit consumes lit, which must come next.
func (d *decoder) lit(lit string) {
	if !d.next(lit) {
		d.ok = false
	}
}

// optional reads the line key = "value" if it comes next.
func (d *decoder) optional(key string) string {
	if !d.next(key) {
		return ""
	}
	s := d.str()
	d.lit("\n")
	return s
}

// token returns the rest of the line.
func (d *decoder) token() string {
	if !d.ok {
		return ""
	}
	n := strings.IndexByte(d.s[d.i:], '\n')
	if n < 0 {
		n = len(d.s) - d.i
	}
	t := d.s[d.i : d.i+n]
	d.i += n
	return t
}

// int reads an integer as TOML decodes it: one that does not fit bitSize
// bits is left to the strict decoder, which refuses it.
func (d *decoder) int(bitSize int) int64 {
	v, err := strconv.ParseInt(d.token(), 10, bitSize)
	if err != nil {
		d.ok = false
	}
	return v
}

// uint reads an unsigned integer. TOML integers are 64-bit signed, so
// one above math.MaxInt64 does not decode.
func (d *decoder) uint() uint64 {
	v := d.int(64)
	if v < 0 {
		d.ok = false
	}
	return uint64(v)
}

// time reads an offset date-time the way BurntSushi/toml does, so the
// value (down to its location) is the one the strict decoder gives.
func (d *decoder) time() time.Time {
	t, err := time.ParseInLocation(time.RFC3339Nano, d.token(), time.Local)
	if err != nil {
		d.ok = false
	}
	return t
}

// str reads a basic string with the escapes appendString writes.
func (d *decoder) str() string {
	if !d.ok || d.i >= len(d.s) || d.s[d.i] != '"' {
		d.ok = false
		return ""
	}
	d.i++
	start := d.i
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			return d.s[start:j]
		case c == '\\':
			return d.escaped(start, j)
		case c < 0x20 || c == 0x7f:
			d.ok = false
			return ""
		}
	}
	d.ok = false
	return ""
}

// escaped finishes a string from start whose first escape is at j.
func (d *decoder) escaped(start, j int) string {
	b := make([]byte, 0, j-start+16)
	b = append(b, d.s[start:j]...)
	for j < len(d.s) {
		c := d.s[j]
		switch {
		case c == '"':
			d.i = j + 1
			return string(b)
		case c < 0x20 || c == 0x7f:
			d.ok = false
			return ""
		case c != '\\':
			b = append(b, c)
			j++
			continue
		}
		if j+1 >= len(d.s) {
			break
		}
		switch d.s[j+1] {
		case '"', '\\':
			b = append(b, d.s[j+1])
		case 'b':
			b = append(b, '\b')
		case 't':
			b = append(b, '\t')
		case 'n':
			b = append(b, '\n')
		case 'f':
			b = append(b, '\f')
		case 'r':
			b = append(b, '\r')
		case 'u':
			if j+6 > len(d.s) {
				d.ok = false
				return ""
			}
			v, err := strconv.ParseUint(d.s[j+2:j+6], 16, 16)
			if err != nil || !utf8.ValidRune(rune(v)) {
				d.ok = false
				return ""
			}
			b = utf8.AppendRune(b, rune(v))
			j += 6
			continue
		default:
			d.ok = false
			return ""
		}
		j += 2
	}
	d.ok = false
	return ""
}
