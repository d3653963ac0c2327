package enrol

import (
	"context"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/testutil/fill"
	"github.com/muster-tool/muster/internal/token"
	"github.com/muster-tool/muster/spool"
)

func TestRegistryCacheCoversEveryField(t *testing.T) {
	c := &registryCache{Spool: "dir:/srv/spool", Mesh: "ed25519:mesh", Records: map[string]cachedRecord{}}
	for i, r := range []cachedRecord{
		{Admission: &Admission{}}, {Refusal: &Refusal{}}, {Revocation: &Revocation{}}, {Label: &LabelChange{}},
	} {
		v := reflect.ValueOf(&r).Elem()
		for j := range v.NumField() {
			if f := v.Field(j); f.Kind() == reflect.Pointer && !f.IsNil() {
				fill.Value(f.Elem())
			}
		}
		r.Size = int64(100 + i)
		c.Records[fmt.Sprintf("enrol/x/%d", i)] = r
	}
	fill.Value(reflect.ValueOf(&c.JoinDirs).Elem())
	roundTrip(t, c, appendRegistryCache, decodeRegistryCache)
}

// damageByte changes one byte of the payload of the cache at path.
func damageByte(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-3] ^= 0x20
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// roundTrip checks that cache c decodes as it was encoded, and that the
// encoding cut anywhere never decodes.
func roundTrip[C any](t *testing.T, c *C, encode func([]byte, *C) []byte, decode func(string) (*C, error)) {
	t.Helper()
	payload := encode(nil, c)
	got, err := decode(string(payload))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Errorf("round trip differs:\n got %+v\nwant %+v", got, c)
	}
	for i := range len(payload) {
		if _, err := decode(string(payload[:i])); err == nil {
			t.Fatalf("a cache cut to %d of %d bytes decoded", i, len(payload))
		}
	}
}

// The admissions of one role share one map of labels once decoded; other
// labels get their own.
func TestRegistryCacheSharesLabels(t *testing.T) {
	c := &registryCache{Records: map[string]cachedRecord{}}
	for i, labels := range []map[string]string{{"role": "web"}, {"role": "web"}, {"role": "db"}, nil} {
		c.Records[fmt.Sprintf("enrol/admit/%d", i)] = cachedRecord{Size: 1, Admission: &Admission{TokenID: fmt.Sprint(i), Labels: labels}}
	}
	got, err := decodeRegistryCache(string(appendRegistryCache(nil, c)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.Records, c.Records) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got.Records, c.Records)
	}
	labels := func(i int) map[string]string { return got.Records[fmt.Sprintf("enrol/admit/%d", i)].Admission.Labels }
	if reflect.ValueOf(labels(0)).UnsafePointer() != reflect.ValueOf(labels(1)).UnsafePointer() {
		t.Error("two admissions with the same labels decoded into two maps")
	}
	if reflect.ValueOf(labels(0)).UnsafePointer() == reflect.ValueOf(labels(2)).UnsafePointer() || labels(3) != nil {
		t.Error("other labels share a map")
	}
}

// getCounter counts the enrolment records a registry load opens.
type getCounter struct {
	spool.Spool
	mu    sync.Mutex
	gets  []string
	lists []string // the prefixes listed
}

func (g *getCounter) List(ctx context.Context, prefix string, fn func(spool.Info) error) error {
	g.mu.Lock()
	g.lists = append(g.lists, prefix)
	g.mu.Unlock()
	return g.Spool.List(ctx, prefix, fn)
}

func (g *getCounter) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	g.mu.Lock()
	g.gets = append(g.gets, name)
	g.mu.Unlock()
	return g.Spool.Get(ctx, name, max)
}

func (g *getCounter) take() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := g.gets
	g.gets = nil
	slices.Sort(out)
	return out
}

// describe renders who the registry trusts and what it refused.
func describe(r *Registry) string {
	var b strings.Builder
	for _, n := range r.Names() {
		node := r.Nodes[n]
		for _, id := range append(slices.Clone(node.Past), node.Current) {
			fmt.Fprintf(&b, "%s %s admitted %s revoked %s %q labels %v\n", n, id.NodeID,
				id.AdmittedAt.Format(time.RFC3339Nano), id.RevokedAt.Format(time.RFC3339Nano), id.RevokeReason, id.Labels)
		}
	}
	var refused []string
	for k, rf := range r.Refused {
		refused = append(refused, fmt.Sprintf("refused %s: %s at %s", k, rf.Reason, rf.RefusedAt.Format(time.RFC3339Nano)))
	}
	slices.Sort(refused)
	b.WriteString(strings.Join(refused, "\n"))
	return b.String()
}

// The story: the mesh reads its enrolment records once. Every later
// command opens only the records it has not seen, trusts exactly what the
// spool still holds, and a cache that is damaged or another mesh's is
// rebuilt from the spool with a warning, never trusted.
func TestRegistryCache(t *testing.T) {
	f := newFixture(t)
	for _, name := range []string{"web-1", "web-2", "db-1"} {
		f.join(name, f.issue(IssueOptions{Name: name, Labels: map[string]string{"role": name[:2]}}), t0)
	}
	late := f.issue(IssueOptions{Name: "late", Expires: time.Minute})
	f.join("late", late, t0)
	counter := &getCounter{Spool: f.m.Spool}
	f.m.Spool = counter
	f.admit(t0.Add(time.Hour))
	counter.take()
	// admit kept what it wrote in the cache.
	f.registry()
	if got := counter.take(); len(got) != 0 {
		t.Errorf("after admit, a load opened %q, want nothing", got)
	}
	if _, err := Revoke(f.ctx, f.m, f.registry(), "db-1", "retired", t0.Add(2*time.Hour)); err != nil {
		t.Fatal(err)
	}
	f.label(LabelOptions{Name: "web-1", Set: map[string]string{"site": "ams"}, Now: t0.Add(3 * time.Hour)})

	// label's load read the revocation: only the label change is new.
	counter.take()
	f.registry()
	if got := counter.take(); len(got) != 1 || !strings.HasPrefix(got[0], spool.EnrolLabelPrefix) {
		t.Errorf("after revoke and label, a load opened %q, want only the label change", got)
	}
	path := RegistryCachePath(f.m.Dir, f.m.Spool.String())
	if err := os.Remove(path); err != nil {
		t.Fatalf("no registry cache was written: %v", err)
	}
	first := f.registry()
	want := describe(first)
	records := counter.take()
	if len(records) != 3+1+1+1 || len(first.Refused) != 1 || first.Enrolled("db-1") != nil || first.Enrolled("web-1").Labels["site"] != "ams" {
		t.Fatalf("the first load opened %q and gives:\n%s\nwant three admissions, a refusal, a revocation and a label change", records, want)
	}
	load := func(how string, wantGets []string, warning string) *Registry {
		t.Helper()
		reg := f.registry()
		if got := counter.take(); !slices.Equal(got, wantGets) {
			t.Errorf("%s: opened %q, want %q", how, got, wantGets)
		}
		if w := strings.Join(reg.Warnings, "\n"); warning == "" && w != "" || !strings.Contains(w, warning) {
			t.Errorf("%s: warnings %q, want %q", how, reg.Warnings, warning)
		}
		return reg
	}
	if got := describe(load("with the cache", nil, "")); got != want {
		t.Errorf("with the cache:\n%s\nwant:\n%s", got, want)
	}

	damageByte(t, path)
	if got := describe(load("damaged", records, "checksum does not match")); got != want {
		t.Errorf("with a damaged cache:\n%s\nwant:\n%s", got, want)
	}
	load("rebuilt", nil, "")

	// Another mesh's or another spool's, with the records of this one.
	c, err := readRegistryCache(path, f.m.Spool.String(), f.m.Public().Fingerprint())
	if err != nil || c == nil {
		t.Fatalf("the rebuilt cache does not read: %v", err)
	}
	for _, tc := range []struct{ spool, mesh, warning string }{
		{c.Spool, "ed25519:" + strings.Repeat("A", 43) + "=", "belongs to mesh"},
		{"dir:/elsewhere", c.Mesh, "belongs to spool"},
	} {
		if err := writeRegistryCache(path, &registryCache{Spool: tc.spool, Mesh: tc.mesh, Records: c.Records}); err != nil {
			t.Fatal(err)
		}
		if got := describe(load(tc.warning, records, tc.warning)); got != want {
			t.Errorf("with a cache that %s:\n%s\nwant:\n%s", tc.warning, got, want)
		}
	}

	// A record the spool no longer holds is not trusted from the cache:
	// web-2's admission, as in a spool restored from an older copy.
	admission := spool.AdmitName(first.Enrolled("web-2").TokenID)
	if err := counter.Delete(f.ctx, admission); err != nil {
		t.Fatal(err)
	}
	reg := load("an admission gone", nil, "")
	if reg.Enrolled("web-2") != nil {
		t.Error("web-2 is trusted from the cache after its admission left the spool")
	}
	if uncached := func() string { os.Remove(path); r := f.registry(); counter.take(); return describe(r) }(); describe(reg) != uncached {
		t.Errorf("with the cache:\n%s\nwithout:\n%s", describe(reg), uncached)
	}
}

// dirCounter counts the directories of join requests listed and read.
type dirCounter struct {
	*spool.Dir
	listed, read int
}

func (d *dirCounter) ListDirs(ctx context.Context, prefix string, known func(string, spool.DirStamp) bool, fn func(spool.DirListing) error) error {
	return d.Dir.ListDirs(ctx, prefix, known, func(l spool.DirListing) error {
		d.listed++
		if !l.Known {
			d.read++
		}
		return fn(l)
	})
}

// The story: join requests stay in the spool once decided, one directory
// per token. Once those directories have settled, counting the requests
// still pending reads none of them, until one changes or a decision it
// relied on is no longer in the spool.
func TestPendingSkipsDecidedJoinDirectories(t *testing.T) {
	f := newFixture(t)
	toks := map[string]*token.Token{}
	for _, name := range []string{"web-1", "web-2", "db-1"} {
		toks[name] = f.issue(IssueOptions{Name: name})
		f.join(name, toks[name], t0)
	}
	f.admit(t0.Add(time.Minute))
	d := &dirCounter{Dir: f.m.Spool.(*spool.Dir)}
	f.m.Spool = d
	pending := func(how string, want, read int) {
		t.Helper()
		d.listed, d.read = 0, 0
		n, err := Pending(f.ctx, f.m, f.registry())
		if err != nil || n != want || d.read != read || d.listed != 3 {
			t.Errorf("%s: %d pending (%v), %d of %d directories read; want %d pending, %d of 3 read", how, n, err, d.read, d.listed, want, read)
		}
	}
	time.Sleep(spool.StampSettle + 100*time.Millisecond)
	pending("settled", 0, 3)
	pending("again", 0, 0)

	// A second request for web-2's token, decided by nobody yet.
	data, fp := joinRequest(t, f.m, toks["web-2"].ID(), "web-2", toks["web-2"], t0)
	if err := d.Put(f.ctx, spool.JoinName(toks["web-2"].ID(), fp), data); err != nil {
		t.Fatal(err)
	}
	pending("a new request", 1, 1)

	// db-1's admission gone from the spool: its request is pending again,
	// though its directory did not change.
	if err := d.Delete(f.ctx, spool.AdmitName(toks["db-1"].ID())); err != nil {
		t.Fatal(err)
	}
	pending("an admission gone", 2, 2)
}
