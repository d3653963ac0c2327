package fleet

import (
	"fmt"
	"maps"
	"slices"

	"github.com/muster-tool/muster/internal/bincode"
	"github.com/muster-tool/muster/internal/hugepage"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// The report cache's payload is cacheData in bincode's layout, written
// field by field, as the declaration cache's is (internal/generation). Formats 1
// and 2 were gob, which was linked in for this cache alone: its
// initialisation cost every muster process time at start-up (see the
// README's Performance section), apply on every host included, and it
// decoded the facts more slowly.
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
	e := &cacheEncoder{Encoder: bincode.Encoder{B: slices.Grow(b, n+64*len(c.Commits))}}
	e.Int(int64(c.Version))
	e.Str(c.Spool)
	e.Str(c.Mesh)
	e.Uint(uint64(len(c.Strings)))
	for _, s := range c.Strings {
		e.Str(s)
	}
	e.Uint(uint64(len(c.Commits)))
	for g, f := range c.Commits {
		e.Uint(g)
		e.Str(f.Run)
		e.Time(f.DeclaredAt)
		e.Str(f.Digest)
		e.Str(f.Previous)
		e.Uint(f.PreviousGeneration)
		e.Time(f.ExpiresAt)
	}
	e.Uint(uint64(len(c.Manifests)))
	// From sharedVersion on, in generation order, each node list written
	// once for the generations in a row that share it.
	var prev *manifestFact
	for _, g := range slices.Sorted(maps.Keys(c.Manifests)) {
		m := c.Manifests[g]
		e.Uint(g)
		e.Str(m.Run)
		if c.Version >= sharedVersion {
			same := prev != nil && slices.Equal(m.Names, prev.Names) && slices.Equal(m.IDs, prev.IDs)
			if same {
				e.Uint(1)
			} else {
				e.Uint(0)
				e.indexes(m.Names)
				e.indexes(m.IDs)
			}
			prev = &m
		} else {
			e.indexes(m.Names)
			e.indexes(m.IDs)
		}
		e.indexes(m.Ineligible)
		e.indexes(m.Unassigned)
		e.indexes(m.Held)
		e.Uint(uint64(len(m.HeldOn)))
		for _, g := range m.HeldOn {
			e.Uint(g)
		}
		e.Str(m.Wave)
	}
	e.Uint(uint64(len(c.Ledgers)))
	for sum, l := range c.Ledgers {
		e.Raw(sum[:])
		e.Uint(uint64(len(l)))
		e.Raw(l)
	}
	if c.Version >= compactVersion {
		e.reportStrings(c)
	}
	e.Uint(uint64(len(c.Nodes)))
	for id, nf := range c.Nodes {
		e.Str(id)
		if nf == nil {
			nf = &nodeFacts{}
		}
		e.node(nf, c.Version)
	}
	return e.B
}

type cacheEncoder struct {
	bincode.Encoder
	// strs indexes the table of the reports' strings (versions and
	// commits), from compactVersion on.
	strs map[string]uint64
}

// reportStrings writes the table of the strings the reports name, which
// the facts then name by index.
func (e *cacheEncoder) reportStrings(c *cacheData) {
	e.strs = map[string]uint64{}
	var table []string
	add := func(s string) {
		if _, ok := e.strs[s]; !ok {
			e.strs[s] = uint64(len(table))
			table = append(table, s)
		}
	}
	for _, nf := range c.Nodes {
		if nf == nil {
			continue
		}
		for i := range nf.Reports {
			add(nf.Reports[i].Muster)
			add(nf.Reports[i].Commit)
		}
	}
	e.Strs(table)
}

func (e *cacheEncoder) indexes(xs []uint32) {
	e.Uint(uint64(len(xs)))
	for _, x := range xs {
		e.Uint(uint64(x))
	}
}

func (e *cacheEncoder) lines(ls []outcome.Line) { outcome.AppendLines(&e.Encoder, ls) }

func (e *cacheEncoder) node(nf *nodeFacts, version int) {
	e.Str(nf.Signer)
	e.Uint(uint64(len(nf.Reports)))
	for i := range nf.Reports {
		if version >= compactVersion {
			e.report(&nf.Reports[i])
		} else {
			e.reportBefore(&nf.Reports[i])
		}
	}
	if b := nf.Brief; b == nil {
		e.Uint(0)
	} else {
		e.Uint(1)
		e.Uint(b.Seq)
		e.Int(b.Size)
		e.Int(b.Time)
		e.lines(b.Failed)
	}
	if l := nf.Ledger; l == nil {
		e.Uint(0)
	} else {
		e.Uint(1)
		e.Uint(l.Gen)
		e.Uint(l.Seq)
		e.Raw(l.Sum[:])
	}
	if version < stampedVersion {
		return
	}
	e.stamp(nf.ReportDir)
	e.stamp(nf.BriefDir)
	e.Flag(nf.Briefed)
	e.Uint(nf.BriefSeq)
}

// A report's flags, from compactVersion on.
const (
	reportPassed = 1 << iota
	reportTold
	reportMoreFacts // Err, Misfiled, Failed and Notes follow
	reportFlags     = reportPassed | reportTold | reportMoreFacts
)

func (e *cacheEncoder) report(f *reportFact) {
	e.Uint(f.Gen)
	e.Uint(f.Seq)
	e.Int(f.Size)
	e.Int(f.Start)
	e.Int(f.End)
	e.Uint(e.strs[f.Muster])
	e.Uint(e.strs[f.Commit])
	var flags uint64
	if f.Passed {
		flags |= reportPassed
	}
	if f.Told {
		flags |= reportTold
	}
	m := f.More
	more := !m.empty()
	if more {
		flags |= reportMoreFacts
	}
	e.Uint(flags)
	if more {
		e.Str(m.Err)
		e.Str(m.Misfiled)
		e.lines(m.Failed)
		e.Strs(m.Notes)
	}
}

// reportBefore writes a report in the layout before compactVersion.
func (e *cacheEncoder) reportBefore(f *reportFact) {
	e.Uint(f.Gen)
	e.Uint(f.Seq)
	e.Int(f.Size)
	e.Str(f.err())
	e.Str(f.misfiled())
	var o outcome.Outcome
	if f.Passed {
		o = outcome.Passed
	}
	e.Str(string(o))
	e.lines(f.failed())
	e.Strs(f.notes())
	e.Int(f.Start)
	e.Int(f.End)
	e.Str(f.Muster)
	e.Str(f.Commit)
	e.Flag(f.Told)
}

func (e *cacheEncoder) stamp(st spool.DirStamp) {
	e.Uint(st.Dev)
	e.Uint(st.Ino)
	e.Int(st.Ctime)
}

// The fewest bytes each element takes, which bound the count of a list
// read from what is left of the input.
const (
	minCommit   = 8  // generation, run, seconds, nanoseconds, digest, previous, its generation, expiry
	minManifest = 9  // generation, run, six lists, wave
	minLedger   = 33 // sum, length
	minNode     = 5  // id, signer, reports, brief, ledger
	minStamps   = 8  // two stamps of three, briefed, its seq
	minReport   = 8  // one byte a field, and none for what few reports have
	// minReportBefore is a report's fewest bytes before compactVersion.
	minReportBefore = 13
)

// decodeCache decodes a payload appendCache wrote. The facts' strings are
// slices of s.
func decodeCache(s string) (*cacheData, error) {
	d := &cacheDecoder{Decoder: bincode.Decoder{S: s}}
	// bad names what was being read when decoding failed.
	bad := func(format string, args ...any) error {
		return fmt.Errorf("does not decode: "+format+": %v", append(args, d.Err)...)
	}
	c := &cacheData{Version: int(d.Int())}
	if d.Err == nil && (c.Version < stampedVersion-1 || c.Version > cacheVersion) {
		return nil, fmt.Errorf("in another format than this muster's (format %d)", cacheVersion)
	}
	d.version = c.Version
	stamped := d.version >= stampedVersion
	minNode := minNode
	if stamped {
		minNode += minStamps
	}
	minReport := minReport
	if d.version < compactVersion {
		minReport = minReportBefore
	}
	// A cache of a format before keeps its version, so that the load
	// that reads it writes it again in this one (State.openCache).
	c.Spool = d.Str()
	c.Mesh = d.Str()
	if n := d.Count(1); n > 0 {
		c.Strings = make([]string, n)
		for i := range c.Strings {
			c.Strings[i] = d.Str()
		}
	}
	if d.Err != nil {
		return nil, bad("the string table")
	}

	n := d.Count(minCommit)
	if d.Err != nil {
		return nil, bad("the commits")
	}
	c.Commits = make(map[uint64]commitFact, n)
	for range n {
		g := d.Uint()
		f := commitFact{Run: d.Str(), DeclaredAt: d.Time(), Digest: d.Str(), Previous: d.Str(), PreviousGeneration: d.Uint(), ExpiresAt: d.Time()}
		if _, dup := c.Commits[g]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, bad("commit of generation %d", g)
		}
		c.Commits[g] = f
	}

	n = d.Count(minManifest)
	if d.Err != nil {
		return nil, bad("the manifests")
	}
	c.Manifests = make(map[uint64]manifestFact, n)
	var prev *manifestFact
	for range n {
		g := d.Uint()
		m := manifestFact{Run: d.Str()}
		limit := uint64(len(c.Strings))
		var shared uint64
		if c.Version >= sharedVersion {
			shared = d.Uint()
		}
		switch {
		case d.Err != nil:
		case shared > 1:
			d.Failf("node list marked %d", shared)
		case shared == 1 && prev == nil:
			d.Failf("the node list of the manifest before, but it is the first")
		case shared == 1:
			// The same arrays: a fleet's stable node list is held once.
			m.Names, m.IDs = prev.Names, prev.IDs
		default:
			m.Names = d.indexes(limit)
			m.IDs = d.indexes(limit)
		}
		m.Ineligible = d.indexes(limit)
		m.Unassigned = d.indexes(limit)
		m.Held = d.indexes(limit)
		if k := d.Count(1); k > 0 {
			m.HeldOn = make([]uint64, k)
			for i := range m.HeldOn {
				m.HeldOn[i] = d.Uint()
			}
		}
		m.Wave = d.Str()
		if len(m.Names) != len(m.IDs) && d.Err == nil {
			d.Failf("%d node names but %d node ids", len(m.Names), len(m.IDs))
		}
		if len(m.Held) != len(m.HeldOn) && d.Err == nil {
			d.Failf("%d held nodes but %d generations they keep", len(m.Held), len(m.HeldOn))
		}
		if _, dup := c.Manifests[g]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, bad("manifest of generation %d", g)
		}
		c.Manifests[g] = m
		prev = &m
	}

	n = d.Count(minLedger)
	if d.Err != nil {
		return nil, bad("the ledgers")
	}
	c.Ledgers = make(map[[32]byte][]byte, n)
	for range n {
		sum := d.sum()
		var l []byte
		if m := d.Count(1); m > 0 {
			l = []byte(d.Fixed(m))
		}
		if _, dup := c.Ledgers[sum]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, bad("ledger %x", sum)
		}
		c.Ledgers[sum] = l
	}

	if d.version >= compactVersion {
		d.strs = d.Strs()
		if d.Err != nil {
			return nil, bad("the reports' strings")
		}
	}

	n = d.Count(minNode)
	if d.Err != nil {
		return nil, bad("the nodes")
	}
	c.Nodes = make(map[string]*nodeFacts, n)
	// One array for the nodes, and one each for their briefings and
	// ledgers: a cache of ten thousand nodes is read on every run.
	nodes := hugepage.Slice[nodeFacts](n)
	briefs := make([]briefFact, 0, n)
	refs := make([]ledgerRef, 0, n)
	// The nodes' reports in a few large arrays: a million facts in
	// 4 KiB pages, faulted in one by one, cost report more than decoding
	// them.
	var facts hugepage.Slab[reportFact]
	var known *[32]byte // the sum last found in c.Ledgers
	for i := range nodes {
		id := d.Str()
		nf := &nodes[i]
		nf.Signer = d.Str()
		if m := d.Count(minReport); m > 0 {
			nf.Reports = facts.Take(m, len(d.S)/minReport)
			for j := range nf.Reports {
				if d.version >= compactVersion {
					d.report(&nf.Reports[j])
				} else {
					d.reportBefore(&nf.Reports[j])
				}
			}
		}
		if d.Flag() {
			briefs = append(briefs, briefFact{Seq: d.Uint(), Size: d.Int(), Time: d.Int(), Failed: d.lines()})
			nf.Brief = &briefs[len(briefs)-1]
		}
		if d.Flag() {
			refs = append(refs, ledgerRef{Gen: d.Uint(), Seq: d.Uint(), Sum: d.sum()})
			nf.Ledger = &refs[len(refs)-1]
			if sum := &nf.Ledger.Sum; (known == nil || *sum != *known) && d.Err == nil {
				if _, ok := c.Ledgers[*sum]; !ok {
					d.Failf("its recovery copy is ledger %x, which the cache does not hold", *sum)
				}
				known = sum
			}
		}
		if stamped {
			nf.ReportDir, nf.BriefDir = d.stamp(), d.stamp()
			nf.Briefed, nf.BriefSeq = d.Flag(), d.Uint()
		}
		if _, dup := c.Nodes[id]; dup && d.Err == nil {
			d.Failf("listed twice")
		}
		if d.Err != nil {
			return nil, bad("node %q", id)
		}
		c.Nodes[id] = nf
	}
	if err := d.End("the facts"); err != nil {
		return nil, err
	}
	return c, nil
}

// cacheDecoder reads the payload; see bincode.Decoder.
type cacheDecoder struct {
	bincode.Decoder
	version int      // the payload's format
	strs    []string // the reports' strings, from compactVersion on
}

func (d *cacheDecoder) stamp() spool.DirStamp {
	return spool.DirStamp{Dev: d.Uint(), Ino: d.Uint(), Ctime: d.Int()}
}

func (d *cacheDecoder) sum() (sum [32]byte) {
	copy(sum[:], d.Fixed(len(sum)))
	return sum
}

// indexes reads a list of indexes into a string table of limit strings.
func (d *cacheDecoder) indexes(limit uint64) []uint32 {
	n := d.Count(1)
	if n == 0 {
		return nil
	}
	xs := make([]uint32, n)
	for i := range xs {
		x := d.Uint()
		if x >= limit {
			if d.Err == nil {
				d.Failf("string %d, but the cache holds %d", x, limit)
			}
			return nil
		}
		xs[i] = uint32(x)
	}
	return xs
}

func (d *cacheDecoder) lines() []outcome.Line { return outcome.ReadLines(&d.Decoder) }

func (d *cacheDecoder) report(f *reportFact) {
	f.Gen = d.Uint()
	f.Seq = d.Uint()
	f.Size = d.Int()
	f.Start = d.Int()
	f.End = d.Int()
	f.Muster = d.str()
	f.Commit = d.str()
	flags := d.Uint()
	if flags&^reportFlags != 0 && d.Err == nil {
		d.Failf("a report's flags are %#x", flags)
	}
	f.Passed = flags&reportPassed != 0
	f.Told = flags&reportTold != 0
	f.More = nil
	if flags&reportMoreFacts != 0 {
		d.more(f)
	}
}

// reportBefore reads a report in the layout before compactVersion.
func (d *cacheDecoder) reportBefore(f *reportFact) {
	f.Gen = d.Uint()
	f.Seq = d.Uint()
	f.Size = d.Int()
	d.more(f)
	f.Start = d.Int()
	f.End = d.Int()
	f.Muster = d.Str()
	f.Commit = d.Str()
	f.Told = d.Flag()
}

// more reads what only some reports have, leaving f.More nil when all of
// it is empty. Before compactVersion the outcome comes between the
// misfiling and the failed lines, and is read into f.Passed.
func (d *cacheDecoder) more(f *reportFact) {
	var m reportMore
	m.Err, m.Misfiled = d.Str(), d.Str()
	if d.version < compactVersion {
		f.Passed = outcome.Outcome(d.Str()) == outcome.Passed
	}
	m.Failed, m.Notes = d.lines(), d.Strs()
	if !m.empty() {
		kept := m // m itself stays on the stack: most reports keep none
		f.More = &kept
	}
}

// str reads an index into the reports' strings.
func (d *cacheDecoder) str() string {
	x := d.Uint()
	if x >= uint64(len(d.strs)) {
		if d.Err == nil {
			d.Failf("report string %d, but the cache holds %d", x, len(d.strs))
		}
		return ""
	}
	return d.strs[x]
}
