package fleet

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/spool"
)

// t0 is when every fixture starts: times in tests are fixed.
var t0 = time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)

// countingSpool counts and records the objects a run reads.
type countingSpool struct {
	spool.Spool
	mu    sync.Mutex
	gets  []string
	lists []string // the prefixes listed by ListDirs
}

func (c *countingSpool) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	c.mu.Lock()
	c.gets = append(c.gets, name)
	c.mu.Unlock()
	return c.Spool.Get(ctx, name, max)
}

// ListNames passes the directory spool's listing without sizes through,
// so the tests list as a report on a directory spool does.
func (c *countingSpool) ListNames(ctx context.Context, prefix string, fn func(string) error) error {
	return c.Spool.(*spool.Dir).ListNames(ctx, prefix, fn)
}

// ListDirs passes the directory spool's listing of directories through,
// with their stamps, as a report on a directory spool lists.
func (c *countingSpool) ListDirs(ctx context.Context, prefix string, known func(string, spool.DirStamp) bool, fn func(spool.DirListing) error) error {
	c.mu.Lock()
	c.lists = append(c.lists, prefix)
	c.mu.Unlock()
	return c.Spool.(*spool.Dir).ListDirs(ctx, prefix, known, fn)
}

// listOnly hides ListNames: a spool, such as S3, whose listing comes with
// sizes.
type listOnly struct{ spool.Spool }

// takeData returns the names read since the last call, sorted, but for
// one read of the newest commit when it is the only commit read: a run
// that finds no new commit reads the newest again, to notice a spool
// restored from another copy under the same name (State.loadCommits), so
// it is not data read again.
func (c *countingSpool) takeData() []string {
	got := c.take()
	at, n := -1, 0
	for i, name := range got {
		if strings.HasPrefix(name, spool.CommitPrefix) {
			at, n = i, n+1
		}
	}
	if n == 1 {
		return append(got[:at:at], got[at+1:]...)
	}
	return got
}

// take returns the names read since the last call, sorted.
func (c *countingSpool) take() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.gets
	c.gets = nil
	sort.Strings(out)
	return out
}

// fixture is a real mesh and spool with a registry built by hand: the
// registry is report's input, whatever enrolment records produced it.
type fixture struct {
	t     testing.TB
	ctx   context.Context
	dir   string
	m     *mesh.Mesh
	sp    *countingSpool
	reg   *enrol.Registry
	pairs map[string]*keys.Pair // by node id
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	sdir := filepath.Join(dir, "spool")
	if err := os.Mkdir(sdir, 0o755); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	m, err := mesh.Init(ctx, filepath.Join(dir, "mesh"), sdir, t0)
	if err != nil {
		t.Fatal(err)
	}
	sp := &countingSpool{Spool: m.Spool}
	m.Spool = sp
	return &fixture{
		t: t, ctx: ctx, dir: dir, m: m, sp: sp,
		reg: &enrol.Registry{
			Issued: map[string]*enrol.Issued{}, Admitted: map[string]*enrol.Admission{}, Refused: map[string]*enrol.Refusal{},
			Identities: map[string]*enrol.Identity{}, Nodes: map[string]*enrol.Node{},
		},
		pairs: map[string]*keys.Pair{},
	}
}

// enrol gives name a new identity at time at; an identity it had before is
// revoked then, as re-enrolment does.
func (f *fixture) enrol(name string, at time.Time) *enrol.Identity {
	f.t.Helper()
	pair, err := keys.Generate()
	if err != nil {
		f.t.Fatal(err)
	}
	pub := pair.Public()
	id := &enrol.Identity{NodeID: pub.Fingerprint(), Name: name, Host: pub, AdmittedAt: at}
	f.pairs[id.NodeID] = pair
	f.reg.Identities[id.NodeID] = id
	n := f.reg.Nodes[name]
	if n == nil {
		n = &enrol.Node{Name: name}
		f.reg.Nodes[name] = n
	}
	if n.Current != nil {
		if !n.Current.Revoked() {
			n.Current.RevokedAt, n.Current.RevokeReason = at, "replaced by re-enrolment"
		}
		n.Past = append(n.Past, n.Current)
	}
	n.Current = id
	return id
}

func (f *fixture) revoke(id *enrol.Identity, at time.Time, reason string) {
	id.RevokedAt, id.RevokeReason = at, reason
}

// commit declares generation gen at time at with manifest man (nil: no
// manifest is written).
func (f *fixture) commit(gen uint64, at time.Time, man *generation.Manifest) {
	f.t.Helper()
	f.commitAfter(gen, at, man, nil, "")
}

// commitAfter is commit for a commit following prev (nil: none), of the
// run named run ("": one made of the generation), and returns it.
func (f *fixture) commitAfter(gen uint64, at time.Time, man *generation.Manifest, prev *generation.Commit, run string) *generation.Commit {
	f.t.Helper()
	if run == "" {
		run = "run" + spool.GenerationName(gen)[16:]
	}
	c := generation.Commit{Version: generation.CommitVersion, Generation: gen, Run: run, DeclaredAt: at}
	if prev != nil {
		c.Previous, c.PreviousGeneration = prev.Digest, prev.Generation
	}
	data, err := bundle.SignTOML(c, generation.CommitCtx(gen), f.m.Pair.Sign)
	if err != nil {
		f.t.Fatal(err)
	}
	c.Digest = generation.Digest(data)
	f.put(spool.CommitName(gen), data)
	if man == nil {
		return &c
	}
	man.Version, man.Generation, man.Run, man.DeclaredAt = generation.FormatVersion, gen, run, at
	data, err = bundle.SealTOML(man, generation.ManifestCtx(gen, run), f.m.Pair.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	f.put(spool.ManifestName(gen, run), data)
	return &c
}

func (f *fixture) put(name string, data []byte) {
	f.t.Helper()
	if err := f.sp.Put(f.ctx, name, data); err != nil {
		f.t.Fatal(err)
	}
}

// assign is a manifest entry for identity id.
func assign(id *enrol.Identity) generation.ManifestNode {
	return generation.ManifestNode{Name: id.Name, NodeID: id.NodeID, Digest: "d", Resources: map[string]string{"file:/etc/motd": "d1"}}
}

// report writes a report of generation gen from identity id, signed by its
// key. Empty Node, NodeID and Generation are filled in from id and gen;
// the lines are ok unless failed names lines that failed.
func (f *fixture) report(id *enrol.Identity, gen uint64, at time.Time, failed ...string) *report.Report {
	r := &report.Report{Version: report.FormatVersion, Node: id.Name, NodeID: id.NodeID, Generation: gen,
		Start: at.Add(-time.Minute), End: at, Muster: "1.0.0", NewestSeen: gen,
		Lines:  []outcome.Line{{ID: "file:/etc/motd", Status: outcome.OK, Digest: "d1"}},
		Ledger: []ledger.Entry{{ID: "file:/etc/motd", Kind: "file", Path: "/etc/motd", Digest: "d1"}},
	}
	for _, l := range failed {
		r.Lines = append(r.Lines, outcome.Line{ID: l, Status: outcome.Failed, Detail: l + " could not be verified"})
	}
	return r
}

// write seals r as report seq of gen under identity id's node id.
func (f *fixture) write(id *enrol.Identity, gen, seq uint64, r *report.Report) string {
	f.t.Helper()
	name := spool.ReportName(id.NodeID, gen, seq)
	data, err := bundle.Seal(report.Marshal(r), report.Ctx(id.NodeID, gen, seq), f.pairs[id.NodeID].Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	f.put(name, data)
	return name
}

// writePayload seals payload, a report's TOML however spelt, as report
// seq of gen under identity id's node id.
func (f *fixture) writePayload(id *enrol.Identity, gen, seq uint64, payload []byte) string {
	f.t.Helper()
	name := spool.ReportName(id.NodeID, gen, seq)
	data, err := bundle.Seal(payload, report.Ctx(id.NodeID, gen, seq), f.pairs[id.NodeID].Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	f.put(name, data)
	return name
}

// reportOK writes a passing report and returns its name.
func (f *fixture) reportOK(id *enrol.Identity, gen, seq uint64, at time.Time) string {
	return f.write(id, gen, seq, f.report(id, gen, at))
}

// brief writes briefing seq of id; failed names lines that failed.
func (f *fixture) brief(id *enrol.Identity, seq uint64, at time.Time, failed ...string) {
	f.t.Helper()
	b := brief.Briefing{Version: brief.FormatVersion, Node: id.Name, Time: at, Muster: "1.0.0",
		Lines: []outcome.Line{{ID: "os", Status: outcome.OK, Detail: "Debian GNU/Linux 12"}}}
	for _, l := range failed {
		b.Lines = append(b.Lines, outcome.Line{ID: l, Status: outcome.Failed, Detail: l + " check failed"})
	}
	data, err := bundle.SealTOML(b, enrol.BriefCtx(id.NodeID, seq), f.pairs[id.NodeID].Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		f.t.Fatal(err)
	}
	f.put(spool.BriefName(id.NodeID, seq), data)
}

// cacheDir is where the fixture keeps its report cache.
func (f *fixture) cacheDir() string { return filepath.Join(f.dir, "mesh", "cache") }

func (f *fixture) load(cached bool) *State {
	f.t.Helper()
	o := Options{}
	if cached {
		o.CacheDir = f.cacheDir()
	}
	s, err := Load(f.ctx, f.m, f.reg, o)
	if err != nil {
		f.t.Fatal(err)
	}
	return s
}

func (f *fixture) view(s *State, gen uint64, sel Selection) *View {
	f.t.Helper()
	v, err := s.Generation(f.ctx, gen, sel)
	if err != nil {
		f.t.Fatal(err)
	}
	return v
}

// jsonOf renders a view the way --json --all does.
func jsonOf(t testing.TB, v *View) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, v, true); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func find(v *View, name string) *NodeStatus {
	for i := range v.Nodes {
		if v.Nodes[i].Name == name {
			return &v.Nodes[i]
		}
	}
	return nil
}

// sealAs seals r under node id nodeID's name, signed by another
// identity's key.
func sealAs(f *fixture, signer *enrol.Identity, nodeID string, gen, seq uint64, r *report.Report) ([]byte, error) {
	return bundle.Seal(report.Marshal(r), report.Ctx(nodeID, gen, seq), f.pairs[signer.NodeID].Sign, f.m.Pair.Age.Recipient())
}
