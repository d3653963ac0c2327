package fleet

import (
	"errors"
	"fmt"
	"time"
	"unique"
	"unsafe"

	"github.com/muster-tool/muster/internal/bincode"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// The report cache remembers what earlier runs learned from the spool so
// that the next run reads only objects it has not seen. It holds facts, not
// verdicts: which key verified each report and what the report said. Trust
// (revocations, the newest committed generation) is applied afresh on every
// run from the current registry, so a revocation takes effect at once even
// for reports read long ago.
//
// The file is one cacheData, in the binary layout of cachecodec.go,
// behind a header line and a SHA-256 of the payload. It is written whole
// with atomicfile, so concurrent runs leave one complete file (the last
// writer's; both are correct). Anything wrong with it — missing, another
// version, a checksum that does not match, another spool or mesh — means
// it is rebuilt from the spool, with a warning, never an error.

// cacheVersion changes whenever cacheData, its layout or the meaning of a
// fact changes; an older file is then rebuilt. Versions 1 and 2 were
// written with encoding/gob.
const cacheVersion = 9

// stampedVersion is the first format with the stamps of each node's
// directories. A cache of the format before it is read with none, so that
// the first run of a muster that keeps them reads every node's
// directories once, not every report.
const stampedVersion = 7

// compactVersion is the first format in which a report names the version
// of muster and the commit by index into a table of the reports' strings,
// and writes its outcome and flags as one number and what few reports
// have only when it has it: at a million reports from 100,000 nodes the
// cache is 51 MB, not 67, and its facts take 100 MB less memory.
// A cache of the formats before it is read as it was written.
const compactVersion = 8

// sharedVersion is the first format in which a manifest whose node list is
// the one of the generation before it says so, rather than writing it
// again: report keeps the manifest of every generation it has looked at,
// and a fleet declared to the same nodes each day would otherwise add
// 800 KB a generation at 100,000 nodes to every later report's cache and
// memory. A cache of the formats before it is read as it was written.
const sharedVersion = 9

const cacheMagic = "muster report cache\n"

type cacheData struct {
	Version int
	Spool   string
	Mesh    string // the mesh's fingerprint: facts were decrypted with its key
	// Strings interns the node names and ids of manifests, which repeat
	// in every generation.
	Strings   []string
	Commits   map[uint64]commitFact
	Manifests map[uint64]manifestFact
	Nodes     map[string]*nodeFacts // by node id
	// Ledgers holds the recovery candidates' ledgers as JSON, by SHA-256:
	// nodes of one role tend to own the same things, so most are shared.
	Ledgers map[[32]byte][]byte
}

// commitFact is a verified commit.
type commitFact struct {
	Run                string
	DeclaredAt         time.Time
	Digest             string
	Previous           string
	PreviousGeneration uint64
	ExpiresAt          time.Time
}

// manifestFact is what report needs of a verified manifest, with names and
// node ids as indexes into cacheData.Strings.
type manifestFact struct {
	Run        string
	Names      []uint32 // assigned node names
	IDs        []uint32 // the node id each was assigned as
	Ineligible []uint32
	Unassigned []uint32
	// Held are the nodes a staged rollout held back, and HeldOn the
	// generation each keeps; Wave is the part of the fleet the generation
	// was declared for (see generation.Manifest).
	Held   []uint32
	HeldOn []uint64
	Wave   string
}

// nodeFacts is what is known of one node id's objects.
type nodeFacts struct {
	// Signer is the key the facts were verified against. A node id is the
	// fingerprint of its keys, so this never changes for a real identity;
	// it is kept so that facts verified against another key are dropped.
	Signer  string
	Reports []reportFact // in (Gen, Seq) order, as the spool lists them
	Brief   *briefFact   // the newest briefing, for a trusted current identity
	// Ledger is the recovery candidate: the ledger of the newest usable
	// report of this identity (see recovery.go), kept in
	// cacheData.Ledgers and decoded only when asked for.
	Ledger *ledgerRef
	// ReportDir and BriefDir are the stamps of the node id's directories
	// in the spool (report/<id>/, brief/<id>/) when Reports and Briefed
	// were listed from them; the zero stamp when they are to be read
	// next time (see spool.ListDirs).
	ReportDir, BriefDir spool.DirStamp
	// Briefed says that brief/<id>/ held a briefing when BriefDir was
	// taken, BriefSeq the newest one's sequence number.
	Briefed  bool
	BriefSeq uint64
}

// reportFact is one report object as read and verified. A cache holds one
// for every report of every node, a million at 100,000 nodes, and report
// decodes them all on every run: what few reports have (a refusal, failed
// lines, notes) is behind More, nil for the rest, so that the common fact
// is 88 bytes rather than 176.
type reportFact struct {
	Gen, Seq uint64
	Size     int64
	// Start and End are Unix times in nanoseconds (0: none): two
	// integers are cheaper to keep and to cache, for a hundred thousand
	// facts, than two time.Times.
	Start, End int64
	// Muster is the version of muster that wrote the report. Commit is
	// the digest of the commit the host applied (empty in reports of
	// hosts that did not say). A fleet's reports name a few of each, so
	// each is held once (see internReportString).
	Muster string
	Commit string
	// Passed says the report's outcome is outcome.Passed: no line failed.
	Passed bool
	// Told is set once report has said that the report was refused
	// because its identity is revoked: report says so once per report
	// (see State.Tell), not on every run.
	Told bool
	More *reportMore
}

// reportMore is what only some reports have.
type reportMore struct {
	// Err is why the report was refused (verification or decoding); the
	// report's other facts are then empty.
	Err string
	// Misfiled says how the report's own node, node id or generation
	// disagree with the name it is filed under: signed by the right key
	// but for another node or generation. It is flagged, never counted.
	Misfiled string
	Failed   []outcome.Line
	Notes    []string
}

// empty reports whether m holds nothing, as a nil m does: a fact keeps
// no reportMore then, and the cache writes none.
func (m *reportMore) empty() bool {
	return m == nil || m.Err == "" && m.Misfiled == "" && len(m.Failed) == 0 && len(m.Notes) == 0
}

func (f *reportFact) err() string {
	if f.More == nil {
		return ""
	}
	return f.More.Err
}

func (f *reportFact) misfiled() string {
	if f.More == nil {
		return ""
	}
	return f.More.Misfiled
}

func (f *reportFact) failed() []outcome.Line {
	if f.More == nil {
		return nil
	}
	return f.More.Failed
}

func (f *reportFact) notes() []string {
	if f.More == nil {
		return nil
	}
	return f.More.Notes
}

// more returns f's reportMore, made on the first call.
func (f *reportFact) more() *reportMore {
	if f.More == nil {
		f.More = &reportMore{}
	}
	return f.More
}

// internReportString returns s held once for the process: the version
// and commit every report names repeat across the fleet.
func internReportString(s string) string { return unique.Make(s).Value() }

func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

func fromUnixNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// briefFact is a node's newest briefing.
type briefFact struct {
	Seq    uint64
	Size   int64
	Time   int64          // Unix nanoseconds
	Failed []outcome.Line // the failed lines; a briefing that was refused has one, "briefing"
}

// ledgerRef names the report a recovery candidate comes from and its
// ledger in cacheData.Ledgers.
type ledgerRef struct {
	Gen, Seq uint64
	Sum      [32]byte
}

func newCache(spool, mesh string) *cacheData {
	return &cacheData{
		Version:   cacheVersion,
		Spool:     spool,
		Mesh:      mesh,
		Commits:   map[uint64]commitFact{},
		Manifests: map[uint64]manifestFact{},
		Nodes:     map[string]*nodeFacts{},
		Ledgers:   map[[32]byte][]byte{},
	}
}

// errNoCache means there was no cache file; it is not a problem worth more
// than a note.
var errNoCache = errors.New("no cache")

// readCache loads the cache at path for spool and mesh.
func readCache(path, spool, mesh string) (*cacheData, error) {
	payload, err := bincode.ReadFile(path, cacheMagic)
	if errors.Is(err, bincode.ErrNoFile) {
		return nil, errNoCache
	}
	if err != nil {
		return nil, err
	}
	// The facts' strings point into payload rather than being copied: a
	// second copy of the cache shows in report's peak memory. payload is
	// never written again and nothing else refers to it. decodeCache
	// checks the format version, as the layout depends on it.
	c, err := decodeCache(unsafe.String(unsafe.SliceData(payload), len(payload)))
	if err != nil {
		return nil, err
	}
	if err := bincode.CheckOwner(c.Spool, c.Mesh, spool, mesh); err != nil {
		return nil, err
	}
	return c, nil
}

// writeCache replaces the cache at path atomically.
func writeCache(path string, c *cacheData) error {
	if err := bincode.WriteFile(path, cacheMagic, func(b []byte) []byte { return appendCache(b, c) }); err != nil {
		return fmt.Errorf("report cache %s: %w", path, err)
	}
	return nil
}

// CachePath is where the report cache for spool lives in the cache
// directory: one file per spool, so a mesh used with several spools (a
// local copy, the shared store) keeps a cache for each.
func CachePath(dir, spool string) string { return mesh.CacheFile(dir, "report", spool) }

// intern returns the index of s in the string table.
func (c *cacheData) intern(idx map[string]uint32, s string) uint32 {
	if i, ok := idx[s]; ok {
		return i
	}
	i := uint32(len(c.Strings))
	c.Strings = append(c.Strings, s)
	idx[s] = i
	return i
}
