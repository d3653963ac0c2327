package fleet

import (
	"bytes"
	"crypto/sha256"
	"encoding/gob"
	"fmt"
	"github.com/muster-tool/muster/spool"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/muster-tool/muster/internal/testutil/fill"

	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
)

// richCache is a cache with a fact of every kind: commits (one with the
// zero time), manifests, nodes with and without a briefing and a recovery
// copy, reports refused, misfiled, failed and with notes, and shared
// ledgers.
func richCache() *cacheData {
	c := newCache("dir:/srv/muster/spool", "ed25519:hOWQ0BVANSldTHJime_xPljVBDd9m0vQxTioB5_NAYU")
	idx := map[string]uint32{}
	ledgerA := []byte(`[{"id":"file:/etc/motd","type":"file","path":"/etc/motd","digest":"sha256:aa","created":true}]`)
	ledgerB := []byte(`[]`)
	sumA, sumB := sha256.Sum256(ledgerA), sha256.Sum256(ledgerB)
	c.Ledgers[sumA], c.Ledgers[sumB] = ledgerA, ledgerB
	c.Commits[1] = commitFact{Run: "run0001", DeclaredAt: t0.Add(time.Hour)}
	c.Commits[2] = commitFact{Run: "run0002", DeclaredAt: t0.Add(2*time.Hour + 123456789)}
	c.Commits[7] = commitFact{Run: ""}
	c.Manifests[1] = manifestFact{Run: "run0001",
		Names: []uint32{c.intern(idx, "web-1"), c.intern(idx, "db-1")},
		IDs:   []uint32{c.intern(idx, "ed25519:web1"), c.intern(idx, "ed25519:db1")},
	}
	c.Manifests[2] = manifestFact{Run: "run0002",
		Names:      []uint32{c.intern(idx, "web-1")},
		IDs:        []uint32{c.intern(idx, "ed25519:web1")},
		Ineligible: []uint32{c.intern(idx, "db-1")},
		Unassigned: []uint32{c.intern(idx, "laptop"), c.intern(idx, "")},
		Held:       []uint32{c.intern(idx, "web-2")},
		HeldOn:     []uint64{1},
		Wave:       "canary",
	}
	failed := []outcome.Line{
		{ID: "service:nginx", Status: outcome.Failed, Detail: "nginx.service is not active after start"},
		{ID: "file:/etc/motd", Status: "gone sideways", Detail: "", Digest: "sha256:ff"},
	}
	c.Nodes["ed25519:web1"] = &nodeFacts{
		Signer: "ed25519:web1-key",
		Reports: []reportFact{
			{Gen: 1, Seq: 1, Size: 2311, Passed: true, Start: t0.Add(time.Hour).UnixNano(), End: t0.Add(time.Hour + 3*time.Second).UnixNano(), Muster: "1.0.0"},
			{Gen: 2, Seq: 1, Size: 2400, More: &reportMore{Failed: failed, Notes: []string{"rebooted", "disk \"almost\" full\n"}}, Start: -5, End: 0, Muster: "1.1.0", Commit: "sha256:c2"},
			{Gen: 2, Seq: 2, Size: -1},
			{Gen: 3, Seq: 1, Size: 1 << 40, More: &reportMore{Err: "bundle: signature does not verify"}, Told: true},
			{Gen: 2, Seq: 3, Size: 999, More: &reportMore{Misfiled: "signed by web-1 (identity ed25519:web1) for generation 2, but the report names node db-1"}, Passed: true, Commit: "sha256:c2"},
		},
		Brief:  &briefFact{Seq: 4, Size: 812, Time: t0.UnixNano()},
		Ledger: &ledgerRef{Gen: 2, Seq: 3, Sum: sumA},
	}
	c.Nodes["ed25519:db1"] = &nodeFacts{
		Signer:  "ed25519:db1-key",
		Reports: []reportFact{{Gen: 1, Seq: 1, Size: 100, Passed: true, More: &reportMore{Notes: []string{"apt: 3 packages held back"}}, Muster: "1.0.0"}},
		Brief:   &briefFact{Seq: 1, Size: -1, Failed: []outcome.Line{{ID: "briefing", Status: outcome.Failed, Detail: "does not verify"}}},
	}
	c.Nodes["ed25519:laptop"] = &nodeFacts{
		Signer: "ed25519:laptop-key",
		Ledger: &ledgerRef{Gen: 1, Seq: 9, Sum: sumB},
	}
	c.Nodes["ed25519:old"] = &nodeFacts{Signer: "ed25519:old-key", Ledger: &ledgerRef{Gen: 1, Seq: 1, Sum: sumA}}
	c.Nodes["ed25519:bare"] = &nodeFacts{}
	return c
}

// tinyCache holds one fact of each kind, in as few bytes as it can.
func tinyCache() *cacheData {
	c := newCache("s", "m")
	c.Strings = []string{"a", "b"}
	c.Commits[1] = commitFact{Run: "r", DeclaredAt: t0}
	c.Manifests[1] = manifestFact{Run: "r", Names: []uint32{0}, IDs: []uint32{1}, Ineligible: []uint32{0}, Unassigned: []uint32{1}, Held: []uint32{1}, HeldOn: []uint64{1}, Wave: "w"}
	l := []byte("[]")
	sum := sha256.Sum256(l)
	c.Ledgers[sum] = l
	failed := []outcome.Line{{ID: "i", Status: outcome.Failed, Detail: "d", Digest: "g"}}
	c.Nodes["b"] = &nodeFacts{
		Signer:  "k",
		Reports: []reportFact{{Gen: 1, Seq: 1, Size: 9, More: &reportMore{Err: "e", Misfiled: "f", Failed: failed, Notes: []string{"n"}}, Start: 1, End: 2, Muster: "v", Commit: "c", Told: true}},
		Brief:   &briefFact{Seq: 1, Size: 3, Time: 4, Failed: failed},
		Ledger:  &ledgerRef{Gen: 1, Seq: 1, Sum: sum},
	}
	c.Nodes["c"] = &nodeFacts{Signer: "k"}
	return c
}

// roundTrip encodes c and decodes it again.
func roundTrip(t testing.TB, c *cacheData) *cacheData {
	t.Helper()
	got, err := decodeCache(string(appendCache(nil, c)))
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestCacheCodecRoundTrip(t *testing.T) {
	want := richCache()
	got := roundTrip(t, want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("round trip differs:\n got %s\nwant %s", dumpCache(got), dumpCache(want))
	}
	if got.Nodes["ed25519:db1"].Ledger != nil || got.Nodes["ed25519:laptop"].Brief != nil || got.Nodes["ed25519:web1"].Brief == nil {
		t.Error("a node's briefing or recovery copy came back other than it went")
	}
	if !got.Commits[7].DeclaredAt.IsZero() {
		t.Errorf("the zero time came back as %v", got.Commits[7].DeclaredAt)
	}

	// Through the file, with its header and checksum.
	path := filepath.Join(t.TempDir(), "report.cache")
	if err := writeCache(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := readCache(path, want.Spool, want.Mesh)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("written and read back:\n got %s\nwant %s", dumpCache(got), dumpCache(want))
	}
	if _, err := readCache(path, "dir:/elsewhere", want.Mesh); err == nil || !strings.Contains(err.Error(), "belongs to spool") {
		t.Errorf("read for another spool: %v", err)
	}
	if _, err := readCache(path, want.Spool, "ed25519:other"); err == nil || !strings.Contains(err.Error(), "belongs to mesh") {
		t.Errorf("read for another mesh: %v", err)
	}
}

// The nodes' reports are decoded into shared arrays: a report added to
// one node's must not land on another's.
func TestCacheCodecNodesGrowApart(t *testing.T) {
	want := richCache()
	for id := range want.Nodes {
		got := roundTrip(t, want)
		got.Nodes[id].Reports = append(got.Nodes[id].Reports, reportFact{Gen: 99, Seq: 99})
		for other, of := range got.Nodes {
			if n := len(want.Nodes[other].Reports); other != id && n > 0 && !reflect.DeepEqual(of.Reports, want.Nodes[other].Reports) {
				t.Errorf("a report added to %s changed %s's: %+v", id, other, of.Reports)
			}
		}
	}
}

// An empty cache decodes with its maps made, ready to be filled.
func TestCacheCodecEmpty(t *testing.T) {
	got := roundTrip(t, newCache("", ""))
	if !reflect.DeepEqual(got, newCache("", "")) {
		t.Errorf("empty cache came back as %s", dumpCache(got))
	}
}

func TestCacheCodecTiny(t *testing.T) {
	want := tinyCache()
	if got := roundTrip(t, want); !reflect.DeepEqual(got, want) {
		t.Errorf("round trip differs:\n got %s\nwant %s", dumpCache(got), dumpCache(want))
	}
}

// DeclaredAt keeps its instant to the nanosecond and comes back in UTC,
// as commits are written; the zero time stays zero.
func TestCacheCodecDeclaredAt(t *testing.T) {
	for _, at := range []time.Time{
		{},
		t0,
		time.Date(2026, 11, 1, 9, 0, 0, 999999999, time.UTC),
		time.Date(2026, 11, 1, 10, 30, 0, 1, time.FixedZone("", 90*60)),
		time.Date(1, 1, 1, 0, 0, 0, 1, time.UTC),
		time.Date(1969, 12, 31, 23, 59, 59, 5, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC),
		time.Now(), // with a monotonic reading, which is not kept
	} {
		c := newCache("s", "m")
		c.Commits[1] = commitFact{Run: "r", DeclaredAt: at}
		got := roundTrip(t, c).Commits[1].DeclaredAt
		if !got.Equal(at) || got != at.UTC().Round(0) || got.IsZero() != at.IsZero() {
			t.Errorf("DeclaredAt %v came back as %v", at, got)
		}
	}
}

// Empty lists come back nil, as empty fields did through gob: nothing in
// report tells them apart.
func TestCacheCodecEmptyIsNil(t *testing.T) {
	c := newCache("s", "m")
	c.Strings = []string{}
	c.Manifests[1] = manifestFact{Names: []uint32{}, IDs: []uint32{}, Ineligible: []uint32{}, Unassigned: []uint32{}, Held: []uint32{}, HeldOn: []uint64{}}
	c.Nodes["n"] = &nodeFacts{Reports: []reportFact{{More: &reportMore{Failed: []outcome.Line{}, Notes: []string{}}}}, Brief: &briefFact{Failed: []outcome.Line{}}}
	c.Ledgers[[32]byte{}] = []byte{}
	got := roundTrip(t, c)
	want := newCache("s", "m")
	want.Manifests[1] = manifestFact{}
	want.Nodes["n"] = &nodeFacts{Reports: []reportFact{{}}, Brief: &briefFact{}}
	want.Ledgers[[32]byte{}] = nil
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %s\nwant %s", dumpCache(got), dumpCache(want))
	}
}

func TestCacheCodecCoversEveryField(t *testing.T) {
	var c cacheData
	fill.Value(reflect.ValueOf(&c).Elem())
	// What decoding checks: the format version, string indexes within
	// the table, as many node ids as names, ledgers that exist.
	c.Version = cacheVersion
	for g, m := range c.Manifests {
		for _, xs := range [][]uint32{m.Names, m.IDs, m.Ineligible, m.Unassigned, m.Held} {
			for i := range xs {
				xs[i] %= uint32(len(c.Strings))
			}
		}
		c.Manifests[g] = m
	}
	var sum [32]byte
	for s := range c.Ledgers {
		sum = s
	}
	for _, nf := range c.Nodes {
		nf.Ledger.Sum = sum
	}
	if got := roundTrip(t, &c); !reflect.DeepEqual(got, &c) {
		t.Fatalf("round trip differs:\n got %s\nwant %s", dumpCache(got), dumpCache(&c))
	}
}

// TestCacheCodecReadsTheFormatsBefore: a cache written before directories
// were stamped is read with no stamps, and one written before the compact
// layout of reports is read as it was, not rebuilt: the first run of a new
// muster reads every node's directory again at most, not every report.
func TestCacheCodecReadsTheFormatsBefore(t *testing.T) {
	for _, version := range []int{stampedVersion - 1, compactVersion - 1, sharedVersion - 1} {
		want := richCache()
		for _, nf := range want.Nodes {
			nf.ReportDir = spool.DirStamp{Dev: 1, Ino: 2, Ctime: 3}
			nf.Briefed, nf.BriefSeq = true, 4
		}
		old := *want
		old.Version = version
		got, err := decodeCache(string(appendCache(nil, &old)))
		if err != nil {
			t.Fatalf("format %d: %v", version, err)
		}
		if got.Version != version {
			t.Errorf("format %d read back as format %d", version, got.Version)
		}
		got.Version = cacheVersion
		if version < stampedVersion {
			for _, nf := range want.Nodes {
				nf.ReportDir, nf.Briefed, nf.BriefSeq = spool.DirStamp{}, false, 0
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("format %d read back:\n%s\nwant:\n%s", version, dumpCache(got), dumpCache(want))
		}
	}
}

// TestCacheCodecCompact: the reports of a fleet, which name a few versions
// and commits and mostly passed, take under half the bytes of the format
// before, and their facts under half the memory.
func TestCacheCodecCompact(t *testing.T) {
	c := benchCache(10000, 1000)
	for _, nf := range c.Nodes {
		for i := range nf.Reports {
			f := &nf.Reports[i]
			f.Commit = fmt.Sprintf("sha256:%064x", f.Gen)
		}
	}
	old := *c
	old.Version = compactVersion - 1
	before, now := len(appendCache(nil, &old)), len(appendCache(nil, c))
	if now*2 > before {
		t.Errorf("a cache of 10,000 reports is %d bytes, %d in the format before", now, before)
	}
	if size := reflect.TypeFor[reportFact]().Size(); size > 88 {
		t.Errorf("a report's facts take %d bytes, want at most 88", size)
	}
}

func TestCacheCodecRefusesDamage(t *testing.T) {
	b := appendCache(nil, richCache())
	for i := range len(b) {
		if _, err := decodeCache(string(b[:i])); err == nil {
			t.Fatalf("a cache cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeCache(string(append(b, 0))); err == nil || !strings.Contains(err.Error(), "1 bytes follow") {
		t.Errorf("a cache with a trailing byte: %v", err)
	}

	// version, spool, mesh, then the string table's length.
	head := []byte{byte(2 * cacheVersion), 1, 's', 1, 'm'}
	for _, c := range []struct {
		name    string
		payload []byte
		want    string
	}{
		{"another version", []byte{2 * 2, 1, 's', 1, 'm', 0, 0, 0, 0, 0}, "in another format"},
		{"gob", gobCache(t, richCache()), "in another format"},
		{"huge count", append(head, 0xff, 0xff, 0xff, 0xff, 0x0f), "the string table: a count of 4294967295"},
		{"overflow", append(head, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f), "overflows"},
		{"too many nodes", append(head, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0), "the nodes: a count of 2, with 5 bytes left"},
		{"string index", append(head, 1, 1, 'x', 0, 1, 9, 0, 0, 1, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0), "manifest of generation 9: string 1, but the cache holds 1"},
		{"names and ids", append(head, 1, 1, 'x', 0, 1, 9, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0), "manifest of generation 9: 1 node names but 0 node ids"},
		{"held and generations", append(head, 1, 1, 'x', 0, 1, 9, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0), "manifest of generation 9: 1 held nodes but 0 generations they keep"},
		{"shared first", append(head, 1, 1, 'x', 0, 1, 9, 0, 1, 0, 0, 0, 0, 0, 0, 0), "manifest of generation 9: the node list of the manifest before, but it is the first"},
		{"shared mark", append(head, 1, 1, 'x', 0, 1, 9, 0, 2, 0, 0, 0, 0, 0, 0, 0), "manifest of generation 9: node list marked 2"},
		{"nanoseconds", append(head, 0, 1, 3, 0, 0, 0x80, 0x94, 0xeb, 0xdc, 0x03, 0, 0, 0), "commit of generation 3: a time of 1000000000 nanoseconds"},
		{"twice", append(head, 0, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), "commit of generation 3: listed twice"},
		{"flag", append(head, 0, 0, 0, 0, 0, 1, 1, 'n', 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0), `node "n": a flag that is neither 0 nor 1`},
		{"ledger", append(append(head, 0, 0, 0, 0, 0, 1, 1, 'n', 0, 0, 0, 1, 1, 1), make([]byte, 32)...), `node "n": its recovery copy is ledger 0000`},
		{"report strings", append(head, 0, 0, 0, 0, 9), "the reports' strings: a count of 9"},
		{"report string", append(append(head, 0, 0, 0, 0, 1, 1, 'v', 1, 1, 'n', 0, 1, 1, 1, 0, 0, 0, 0, 5), make([]byte, 20)...), `node "n": report string 5, but the cache holds 1`},
		{"report flags", append(append(head, 0, 0, 0, 0, 1, 1, 'v', 1, 1, 'n', 0, 1, 1, 1, 0, 0, 0, 0, 0, 8), make([]byte, 20)...), `node "n": a report's flags are 0x8`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := decodeCache(string(c.payload))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("got %v, want an error saying %q", err, c.want)
			}
		})
	}
}

// cachedFixture is cacheFixture loaded once with a cache: the view it
// gives, and the cache file's path and facts.
func cachedFixture(t *testing.T) (f *fixture, view, path string, c *cacheData) {
	f, _ = cacheFixture(t)
	view = jsonOf(t, f.view(f.load(true), 0, Selection{All: true}))
	path = CachePath(f.cacheDir(), f.m.Spool.String())
	c, err := readCache(path, f.m.Spool.String(), f.m.Public().Fingerprint())
	if err != nil {
		t.Fatal(err)
	}
	return f, view, path, c
}

// TestCacheFormatBeforeIsWrittenAgain: a cache an older muster wrote in
// the format before is used as it is, no report read again, and written
// back in this muster's format.
func TestCacheFormatBeforeIsWrittenAgain(t *testing.T) {
	f, want, path, c := cachedFixture(t)
	c.Version = compactVersion - 1
	if err := writeCache(path, c); err != nil {
		t.Fatal(err)
	}
	f.sp.take()
	s := f.load(true)
	if got := jsonOf(t, f.view(s, 0, Selection{All: true})); got != want {
		t.Errorf("after a cache in the format before:\n%s\nwant:\n%s", got, want)
	}
	for _, name := range f.sp.take() {
		if strings.HasPrefix(name, spool.ReportPrefix) || strings.HasPrefix(name, spool.BriefPrefix) {
			t.Errorf("read %s again", name)
		}
	}
	if len(s.Warnings) != 0 {
		t.Errorf("warnings %q", s.Warnings)
	}
	c, err := readCache(path, f.m.Spool.String(), f.m.Public().Fingerprint())
	switch {
	case err != nil:
		t.Errorf("the cache written again does not read: %v", err)
	case c.Version != cacheVersion:
		t.Errorf("the cache is in format %d, want %d", c.Version, cacheVersion)
	}
}

// gobCache is c as versions 1 and 2 of the cache wrote it.
func gobCache(t testing.TB, c *cacheData) []byte {
	var b bytes.Buffer
	old := *c
	old.Version = 2
	if err := gob.NewEncoder(&b).Encode(&old); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestCacheOlderFormat: a cache an older muster wrote with gob, checksum
// and all, is rebuilt with a warning.
func TestCacheOlderFormat(t *testing.T) {
	f, want, path, c := cachedFixture(t)
	payload := gobCache(t, c)
	sum := sha256.Sum256(payload)
	if err := os.WriteFile(path, append(append([]byte(cacheMagic), sum[:]...), payload...), 0o600); err != nil {
		t.Fatal(err)
	}
	f.sp.take()
	s := f.load(true)
	if got := jsonOf(t, f.view(s, 0, Selection{All: true})); got != want {
		t.Errorf("after an older cache:\n%s\nwant:\n%s", got, want)
	}
	if w := strings.Join(s.Warnings, "\n"); !strings.Contains(w, "in another format") || !strings.Contains(w, "rebuilding it") {
		t.Errorf("warnings %q, want one saying the cache is in another format", w)
	}
	if len(f.sp.take()) == 0 {
		t.Error("nothing was read again")
	}
	if _, err := readCache(path, f.m.Spool.String(), f.m.Public().Fingerprint()); err != nil {
		t.Errorf("the rebuilt cache does not read: %v", err)
	}
}

// FuzzCacheDecode: no payload makes the decoder panic, and whatever it
// accepts encodes to a payload that decodes to the same facts.
// Its seeds are small, as the fuzzer's minimising of what it finds takes
// time that grows with the square of the input's length.
func FuzzCacheDecode(f *testing.F) {
	f.Add(appendCache(nil, tinyCache()))
	f.Add(appendCache(nil, newCache("", "")))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, p []byte) {
		c, err := decodeCache(string(p))
		if err != nil {
			if c != nil {
				t.Fatal("facts returned with an error")
			}
			return
		}
		again, err := decodeCache(string(appendCache(nil, c)))
		if err != nil {
			t.Fatalf("accepted %q, but its encoding does not decode: %v", p, err)
		}
		if !reflect.DeepEqual(again, c) {
			t.Fatalf("accepted %q as\n%s\nwhich encodes and decodes as\n%s", p, dumpCache(c), dumpCache(again))
		}
	})
}

// dumpCache spells out c, pointers followed, for a failure message.
func dumpCache(c *cacheData) string {
	var b strings.Builder
	fmt.Fprintf(&b, "{Version:%d Spool:%q Mesh:%q Strings:%q Commits:%v Manifests:%+v Ledgers:%d", c.Version, c.Spool, c.Mesh, c.Strings, c.Commits, c.Manifests, len(c.Ledgers))
	for id, nf := range c.Nodes {
		fmt.Fprintf(&b, "\n  node %q: %+v", id, *nf)
		if nf.Brief != nil {
			fmt.Fprintf(&b, " brief %+v", *nf.Brief)
		}
		if nf.Ledger != nil {
			fmt.Fprintf(&b, " ledger %+v", *nf.Ledger)
		}
	}
	return b.String() + "}"
}

// benchCache is the cache the benchmark spool (bench_test.go) leaves:
// reports reports from nodes nodes, one node in twenty failing, every
// node's recovery copy the same ledger, the newest manifest read.
func benchCache(reports, nodes int) *cacheData {
	c := newCache("dir:/srv/muster/spool", "ed25519:hOWQ0BVANSldTHJime_xPljVBDd9m0vQxTioB5_NAYU")
	gens := reports / nodes
	var entries []ledger.Entry
	for k := range 10 {
		path := fmt.Sprintf("/etc/app/conf.d/%02d.conf", k)
		entries = append(entries, ledger.Entry{ID: "file:" + path, Kind: "file", Path: path, Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Created: true})
	}
	lj, err := encodeLedger(entries)
	if err != nil {
		panic(err)
	}
	sum := sha256.Sum256(lj)
	c.Ledgers[sum] = lj
	idx := map[string]uint32{}
	for g := 1; g <= gens; g++ {
		c.Commits[uint64(g)] = commitFact{Run: fmt.Sprintf("run%04d", g), DeclaredAt: t0.Add(time.Duration(g) * time.Hour)}
	}
	newest := manifestFact{Run: c.Commits[uint64(gens)].Run}
	for i := range nodes {
		name, id := fmt.Sprintf("node-%05d", i), fmt.Sprintf("ed25519:%043d", i)
		newest.Names = append(newest.Names, c.intern(idx, name))
		newest.IDs = append(newest.IDs, c.intern(idx, id))
		nf := &nodeFacts{Signer: id, Brief: &briefFact{Seq: 1, Size: 912, Time: t0.UnixNano()}, Ledger: &ledgerRef{Gen: uint64(gens), Seq: 1, Sum: sum}}
		for g := 1; g <= gens; g++ {
			at := t0.Add(time.Duration(g)*time.Hour + time.Duration(i)*time.Millisecond)
			f := reportFact{Gen: uint64(g), Seq: 1, Size: 2311, Passed: true, Start: at.Add(-3 * time.Second).UnixNano(), End: at.UnixNano(), Muster: "1.0.0"}
			if i%20 == 0 {
				f.Passed = false
				f.More = &reportMore{Failed: []outcome.Line{{ID: "service:nginx", Status: outcome.Failed, Detail: "nginx.service is not active after start: failed (Result: exit-code)"}}}
			}
			nf.Reports = append(nf.Reports, f)
		}
		c.Nodes[id] = nf
	}
	c.Manifests[uint64(gens)] = newest
	return c
}

// cpuTime is the process's user and system time so far: the machine that
// runs the benchmarks is shared, so wall time alone says little.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
}

// The cache benchmarks encode and decode the cache of a spool of 100,000
// reports from 10,000 nodes, the size report's budget is set for.

func BenchmarkCacheEncode(b *testing.B) {
	c := benchCache(100000, 10000)
	var n int
	cpu := cpuTime(b)
	for b.Loop() {
		n = len(appendCache(nil, c))
	}
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(n), "bytes")
}

func BenchmarkCacheDecode(b *testing.B) {
	s := string(appendCache(nil, benchCache(100000, 10000)))
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := decodeCache(s); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// BenchmarkCacheRead reads the cache file as a report does: read, check
// and decode.
func BenchmarkCacheRead(b *testing.B) {
	c := benchCache(100000, 10000)
	path := filepath.Join(b.TempDir(), "report.cache")
	if err := writeCache(path, c); err != nil {
		b.Fatal(err)
	}
	cpu := cpuTime(b)
	for b.Loop() {
		if _, err := readCache(path, c.Spool, c.Mesh); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime(b)-cpu)/float64(b.N), "cpu-ns/op")
}

// TestCacheCodecSharesNodeLists: the manifests of generations in a row
// that assigned the same nodes as the same identities hold one node list,
// written once and read back as one array; a generation that differs
// breaks the run, and the cache reads back equal.
func TestCacheCodecSharesNodeLists(t *testing.T) {
	c := newCache("s", "m")
	idx := map[string]uint32{}
	var names, ids, others []uint32
	for i := range 1000 {
		names = append(names, c.intern(idx, fmt.Sprintf("web-%d", i)))
		ids = append(ids, c.intern(idx, fmt.Sprintf("%032x", i)))
	}
	others = append(slices.Clone(ids[:999]), c.intern(idx, "replaced"))
	for g := uint64(1); g <= 30; g++ {
		m := manifestFact{Run: fmt.Sprintf("run%d", g), Names: slices.Clone(names), IDs: slices.Clone(ids)}
		if g == 11 || g == 12 {
			m.IDs = slices.Clone(others) // web-999 re-enrolled for two generations
		}
		c.Manifests[g] = m
	}
	shared := appendCache(nil, c)
	old := *c
	old.Version = sharedVersion - 1
	none := *c
	none.Manifests = nil
	base := len(appendCache(nil, &none)) // the string table and the rest
	if whole := appendCache(nil, &old); (len(shared)-base)*5 > len(whole)-base {
		t.Errorf("30 manifests of 1,000 nodes take %d bytes, %d in the format before", len(shared)-base, len(whole)-base)
	}
	got, err := decodeCache(string(shared))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Manifests, c.Manifests) {
		t.Fatal("the manifests read back differ")
	}
	same := func(a, b []uint32) bool { return unsafe.SliceData(a) == unsafe.SliceData(b) }
	for g := uint64(2); g <= 30; g++ {
		want := g != 11 && g != 13
		if got := same(got.Manifests[g].IDs, got.Manifests[g-1].IDs) && same(got.Manifests[g].Names, got.Manifests[g-1].Names); got != want {
			t.Errorf("generation %d shares the node list of %d: %v, want %v", g, g-1, got, want)
		}
	}
}
