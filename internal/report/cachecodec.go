package report

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/muster-tool/muster/internal/outcome"
)

// The report cache's payload is cacheData in a plain binary layout written
// field by field, as the declaration cache's is (internal/apply). Formats 1
// and 2 were gob, which was linked in for this cache alone: its
// initialisation cost every muster process half a millisecond at start-up,
// apply on every host included, and it decoded the facts more slowly.
//
// The format version comes first, as everything after it depends on it.
// Integers are uvarints (varints where they may be negative), strings and
// ledgers a length and the bytes, a list or a map its count and then its
// elements in the order of the fields, an optional fact (a node's Brief or
// Ledger) 0 for none or 1 and the fact, a SHA-256 its 32 bytes. The
// ledgers come before the nodes so that a node's ledger is checked as it
// is read. A time is Unix seconds and nanoseconds: a commit's DeclaredAt
// is read back in UTC, the zone declare writes it in and the one every
// reader formats it in (the zero time stays zero).
//
// An empty list reads back as nil, as an empty field did through gob:
// nothing in report tells an empty list from none. A nil node is written
// as one with no facts; Load never keeps one.
//
// Decoding trusts nothing, though the checksum has been checked: every
// count is bounded by the bytes left, so a damaged one cannot make a huge
// allocation, and string indexes and ledger sums must name what the cache
// holds, so what decodes is safe to use. A payload that does not decode is
// refused whole. TestCacheCodecCoversEveryField fails when a field is
// added to one of the types without being added here.

// appendCache appends c's payload to b.
func appendCache(b []byte, c *cacheData) []byte {
	// n estimates the payload, to allocate it once.
	n := 256
	for _, s := range c.Strings {
		n += len(s) + 1
	}
	for id, nf := range c.Nodes {
		n += len(id) + 128
		if nf != nil {
			n += len(nf.Signer) + 64*len(nf.Reports)
		}
	}
	for _, l := range c.Ledgers {
		n += len(l) + 40
	}
	e := &cacheEncoder{b: slices.Grow(b, n+64*len(c.Commits))}
	e.int(int64(c.Version))
	e.str(c.Spool)
	e.str(c.Mesh)
	e.uint(uint64(len(c.Strings)))
	for _, s := range c.Strings {
		e.str(s)
	}
	e.uint(uint64(len(c.Commits)))
	for g, f := range c.Commits {
		e.uint(g)
		e.str(f.Run)
		e.time(f.DeclaredAt)
	}
	e.uint(uint64(len(c.Manifests)))
	for g, m := range c.Manifests {
		e.uint(g)
		e.str(m.Run)
		e.indexes(m.Names)
		e.indexes(m.IDs)
		e.indexes(m.Ineligible)
		e.indexes(m.Unassigned)
	}
	e.uint(uint64(len(c.Ledgers)))
	for sum, l := range c.Ledgers {
		e.b = append(e.b, sum[:]...)
		e.uint(uint64(len(l)))
		e.b = append(e.b, l...)
	}
	e.uint(uint64(len(c.Nodes)))
	for id, nf := range c.Nodes {
		e.str(id)
		if nf == nil {
			nf = &nodeFacts{}
		}
		e.node(nf)
	}
	return e.b
}

type cacheEncoder struct{ b []byte }

func (e *cacheEncoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *cacheEncoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }
func (e *cacheEncoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }

func (e *cacheEncoder) time(t time.Time) {
	e.int(t.Unix())
	e.uint(uint64(t.Nanosecond()))
}

func (e *cacheEncoder) indexes(xs []uint32) {
	e.uint(uint64(len(xs)))
	for _, x := range xs {
		e.uint(uint64(x))
	}
}

func (e *cacheEncoder) lines(ls []outcome.Line) {
	e.uint(uint64(len(ls)))
	for i := range ls {
		l := &ls[i]
		e.str(l.ID)
		e.str(string(l.Status))
		e.str(l.Detail)
		e.str(l.Digest)
	}
}

func (e *cacheEncoder) node(nf *nodeFacts) {
	e.str(nf.Signer)
	e.uint(uint64(len(nf.Reports)))
	for i := range nf.Reports {
		f := &nf.Reports[i]
		e.uint(f.Gen)
		e.uint(f.Seq)
		e.int(f.Size)
		e.str(f.Err)
		e.str(f.Misfiled)
		e.str(string(f.Outcome))
		e.lines(f.Failed)
		e.uint(uint64(len(f.Notes)))
		for _, n := range f.Notes {
			e.str(n)
		}
		e.int(f.Start)
		e.int(f.End)
		e.str(f.Muster)
	}
	if b := nf.Brief; b == nil {
		e.uint(0)
	} else {
		e.uint(1)
		e.uint(b.Seq)
		e.int(b.Size)
		e.int(b.Time)
		e.lines(b.Failed)
	}
	if l := nf.Ledger; l == nil {
		e.uint(0)
	} else {
		e.uint(1)
		e.uint(l.Gen)
		e.uint(l.Seq)
		e.b = append(e.b, l.Sum[:]...)
	}
}

// The fewest bytes each element takes, which bound the count of a list
// read from what is left of the input.
const (
	minCommit   = 4  // generation, run, seconds, nanoseconds
	minManifest = 6  // generation, run, four lists
	minLedger   = 33 // sum, length
	minNode     = 5  // id, signer, reports, brief, ledger
	minReport   = 11 // one byte a field
	minLine     = 4
)

// decodeCache decodes a payload appendCache wrote. The facts' strings are
// slices of s.
func decodeCache(s string) (*cacheData, error) {
	d := &cacheDecoder{s: s}
	// bad names what was being read when decoding failed.
	bad := func(format string, args ...any) error {
		return fmt.Errorf("does not decode: "+format+": %v", append(args, d.err)...)
	}
	c := &cacheData{Version: int(d.int())}
	if d.err == nil && c.Version != cacheVersion {
		return nil, fmt.Errorf("in another format than this muster's (format %d)", cacheVersion)
	}
	c.Spool = d.str()
	c.Mesh = d.str()
	if n := d.count(1); n > 0 {
		c.Strings = make([]string, n)
		for i := range c.Strings {
			c.Strings[i] = d.str()
		}
	}
	if d.err != nil {
		return nil, bad("the string table")
	}

	n := d.count(minCommit)
	if d.err != nil {
		return nil, bad("the commits")
	}
	c.Commits = make(map[uint64]commitFact, n)
	for range n {
		g := d.uint()
		f := commitFact{Run: d.str(), DeclaredAt: d.time()}
		if _, dup := c.Commits[g]; dup && d.err == nil {
			d.failf("listed twice")
		}
		if d.err != nil {
			return nil, bad("commit of generation %d", g)
		}
		c.Commits[g] = f
	}

	n = d.count(minManifest)
	if d.err != nil {
		return nil, bad("the manifests")
	}
	c.Manifests = make(map[uint64]manifestFact, n)
	for range n {
		g := d.uint()
		m := manifestFact{Run: d.str()}
		limit := uint64(len(c.Strings))
		m.Names = d.indexes(limit)
		m.IDs = d.indexes(limit)
		m.Ineligible = d.indexes(limit)
		m.Unassigned = d.indexes(limit)
		if len(m.Names) != len(m.IDs) && d.err == nil {
			d.failf("%d node names but %d node ids", len(m.Names), len(m.IDs))
		}
		if _, dup := c.Manifests[g]; dup && d.err == nil {
			d.failf("listed twice")
		}
		if d.err != nil {
			return nil, bad("manifest of generation %d", g)
		}
		c.Manifests[g] = m
	}

	n = d.count(minLedger)
	if d.err != nil {
		return nil, bad("the ledgers")
	}
	c.Ledgers = make(map[[32]byte][]byte, n)
	for range n {
		sum := d.sum()
		var l []byte
		if m := d.count(1); m > 0 {
			l = []byte(d.s[:m])
			d.s = d.s[m:]
		}
		if _, dup := c.Ledgers[sum]; dup && d.err == nil {
			d.failf("listed twice")
		}
		if d.err != nil {
			return nil, bad("ledger %x", sum)
		}
		c.Ledgers[sum] = l
	}

	n = d.count(minNode)
	if d.err != nil {
		return nil, bad("the nodes")
	}
	c.Nodes = make(map[string]*nodeFacts, n)
	// One array for the nodes, and one each for their briefings and
	// ledgers: a cache of ten thousand nodes is read on every run.
	nodes := make([]nodeFacts, n)
	briefs := make([]briefFact, 0, n)
	refs := make([]ledgerRef, 0, n)
	var known *[32]byte // the sum last found in c.Ledgers
	for i := range nodes {
		id := d.str()
		nf := &nodes[i]
		nf.Signer = d.str()
		if m := d.count(minReport); m > 0 {
			nf.Reports = make([]reportFact, m)
			for j := range nf.Reports {
				d.report(&nf.Reports[j])
			}
		}
		if d.flag() {
			briefs = append(briefs, briefFact{Seq: d.uint(), Size: d.int(), Time: d.int(), Failed: d.lines()})
			nf.Brief = &briefs[len(briefs)-1]
		}
		if d.flag() {
			refs = append(refs, ledgerRef{Gen: d.uint(), Seq: d.uint(), Sum: d.sum()})
			nf.Ledger = &refs[len(refs)-1]
			if sum := &nf.Ledger.Sum; (known == nil || *sum != *known) && d.err == nil {
				if _, ok := c.Ledgers[*sum]; !ok {
					d.failf("its recovery copy is ledger %x, which the cache does not hold", *sum)
				}
				known = sum
			}
		}
		if _, dup := c.Nodes[id]; dup && d.err == nil {
			d.failf("listed twice")
		}
		if d.err != nil {
			return nil, bad("node %q", id)
		}
		c.Nodes[id] = nf
	}
	if len(d.s) != 0 {
		return nil, fmt.Errorf("does not decode: %d bytes follow the facts", len(d.s))
	}
	return c, nil
}

var errCacheShort = errors.New("cut short")

// cacheDecoder reads the payload. Its first failure is kept in err and
// empties s, so every read after it gives a zero value.
type cacheDecoder struct {
	s   string
	err error
}

func (d *cacheDecoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
	d.s = ""
}

func (d *cacheDecoder) failf(format string, args ...any) { d.fail(fmt.Errorf(format, args...)) }

// uint reads a uvarint; one byte, the common case, is read inline.
func (d *cacheDecoder) uint() uint64 {
	if s := d.s; len(s) > 0 && s[0] < 0x80 {
		d.s = s[1:]
		return uint64(s[0])
	}
	return d.uintSlow()
}

func (d *cacheDecoder) uintSlow() uint64 {
	var v uint64
	for i := 0; i < len(d.s) && i < binary.MaxVarintLen64; i++ {
		c := d.s[i]
		if i == binary.MaxVarintLen64-1 && c > 1 {
			d.failf("an integer overflows 64 bits")
			return 0
		}
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			d.s = d.s[i+1:]
			return v
		}
	}
	d.fail(errCacheShort)
	return 0
}

func (d *cacheDecoder) int() int64 {
	u := d.uint()
	return int64(u>>1) ^ -int64(u&1)
}

// str returns the next string as a slice of the input: no copy.
func (d *cacheDecoder) str() string {
	n := d.uint()
	if n > uint64(len(d.s)) {
		d.fail(errCacheShort)
		return ""
	}
	s := d.s[:n]
	d.s = d.s[n:]
	return s
}

// count reads the length of a list whose elements take at least least
// bytes each, bounded by what is left so a damaged length cannot make a
// huge allocation.
func (d *cacheDecoder) count(least int) int {
	n := d.uint()
	if n > uint64(len(d.s)/least) {
		if d.err == nil {
			d.failf("a count of %d, with %d bytes left", n, len(d.s))
		}
		return 0
	}
	return int(n)
}

func (d *cacheDecoder) flag() bool {
	switch d.uint() {
	case 0:
		return false
	case 1:
		return true
	}
	if d.err == nil {
		d.failf("a flag that is neither 0 nor 1")
	}
	return false
}

func (d *cacheDecoder) sum() (sum [32]byte) {
	if len(d.s) < len(sum) {
		d.fail(errCacheShort)
		return sum
	}
	copy(sum[:], d.s)
	d.s = d.s[len(sum):]
	return sum
}

func (d *cacheDecoder) time() time.Time {
	sec := d.int()
	nsec := d.uint()
	if nsec >= 1e9 {
		d.failf("a time of %d nanoseconds past the second", nsec)
		return time.Time{}
	}
	return time.Unix(sec, int64(nsec)).UTC()
}

// indexes reads a list of indexes into a string table of limit strings.
func (d *cacheDecoder) indexes(limit uint64) []uint32 {
	n := d.count(1)
	if n == 0 {
		return nil
	}
	xs := make([]uint32, n)
	for i := range xs {
		x := d.uint()
		if x >= limit {
			if d.err == nil {
				d.failf("string %d, but the cache holds %d", x, limit)
			}
			return nil
		}
		xs[i] = uint32(x)
	}
	return xs
}

func (d *cacheDecoder) lines() []outcome.Line {
	n := d.count(minLine)
	if n == 0 {
		return nil
	}
	ls := make([]outcome.Line, n)
	for i := range ls {
		l := &ls[i]
		l.ID = d.str()
		l.Status = outcome.Status(d.str())
		l.Detail = d.str()
		l.Digest = d.str()
	}
	return ls
}

func (d *cacheDecoder) report(f *reportFact) {
	f.Gen = d.uint()
	f.Seq = d.uint()
	f.Size = d.int()
	f.Err = d.str()
	f.Misfiled = d.str()
	f.Outcome = outcome.Outcome(d.str())
	f.Failed = d.lines()
	if n := d.count(1); n > 0 {
		f.Notes = make([]string, n)
		for i := range f.Notes {
			f.Notes[i] = d.str()
		}
	}
	f.Start = d.int()
	f.End = d.int()
	f.Muster = d.str()
}
