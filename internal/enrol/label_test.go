package enrol

import (
	"bytes"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/spool"
)

// label changes web-1's labels, failing the test on error.
func (f *fixture) label(o LabelOptions) *LabelResult {
	f.t.Helper()
	if o.Name == "" {
		o.Name = "web-1"
	}
	if o.Now.IsZero() {
		o.Now = t0
	}
	res, err := Label(f.ctx, f.m, f.registry(), o)
	if err != nil {
		f.t.Fatalf("label %s: %v", o.Name, err)
	}
	return res
}

func enrolWeb1(t *testing.T, labels map[string]string) *fixture {
	t.Helper()
	f := newFixture(t)
	tok := f.issue(IssueOptions{Name: "web-1", Labels: labels, Now: t0})
	f.join("web-1", tok, t0)
	f.admit(t0)
	return f
}

// The story: an operator moves a node to another role by changing its
// labels, without carrying a token to it. Every later reading of the
// registry sees the change, in the order the changes were made, and a
// re-enrolment issued before the change still keeps it.
func TestLabelChangesAreReadBack(t *testing.T) {
	f := enrolWeb1(t, map[string]string{"role": "web", "site": "ams", "canary": "yes"})
	reenrol := f.issue(IssueOptions{Name: "web-1", Reenrol: true, Now: t0.Add(time.Second)})

	res := f.label(LabelOptions{Set: map[string]string{"role": "db"}, Remove: []string{"canary", "absent"}, Now: t0.Add(time.Minute)})
	if !res.Changed || len(res.Absent) != 1 || res.Absent[0] != "absent" {
		t.Errorf("result %+v: want changed, absent [absent]", res)
	}
	// A change made on a machine whose clock is behind still comes last.
	f.label(LabelOptions{Set: map[string]string{"site": "fra"}, Now: t0})
	want := map[string]string{"role": "db", "site": "fra"}
	if got := f.registry().Enrolled("web-1").Labels; !maps.Equal(got, want) {
		t.Errorf("labels read back %v, want %v", got, want)
	}
	// Asking for what is already so writes nothing.
	n := countObjects(t, f, spool.EnrolLabelPrefix)
	if res := f.label(LabelOptions{Set: map[string]string{"role": "db"}, Now: t0.Add(time.Hour)}); res.Changed {
		t.Error("a change to the labels the node has was written")
	}
	if got := countObjects(t, f, spool.EnrolLabelPrefix); got != n {
		t.Errorf("%d label records, want %d", got, n)
	}

	// The rebuilt host keeps the labels as they are when it is admitted.
	f.join("web-1b", reenrol, t0.Add(2*time.Hour))
	_, reg := f.admit(t0.Add(2 * time.Hour))
	id := reg.Enrolled("web-1")
	if id == nil || id.Labels["role"] != "db" || id.Labels["site"] != "fra" || len(id.Labels) != 2 {
		t.Errorf("re-enrolled identity %+v: want labels %v", id, want)
	}
	// And a change to the old identity is not the new one's.
	if got := f.registry().Enrolled("web-1").Labels; !maps.Equal(got, want) {
		t.Errorf("after re-enrolment, labels %v, want %v", got, want)
	}
}

func countObjects(t *testing.T, f *fixture, prefix string) int {
	t.Helper()
	n := 0
	if err := f.m.Spool.List(f.ctx, prefix, func(spool.Info) error { n++; return nil }); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestLabelRefusals(t *testing.T) {
	f := enrolWeb1(t, nil)
	if _, err := Revoke(f.ctx, f.m, f.registry(), "web-1", "retired", t0.Add(time.Minute)); err != nil {
		t.Fatal(err)
	}
	tok := f.issue(IssueOptions{Name: "web-2", Now: t0})
	f.join("web-2", tok, t0)
	f.admit(t0)
	for _, tc := range []struct {
		name  string
		o     LabelOptions
		class fault.Class
		want  string
	}{
		{"unknown node", LabelOptions{Name: "web-9", Set: map[string]string{"a": "b"}}, fault.Failure, "node web-9 is not enrolled"},
		{"revoked node", LabelOptions{Name: "web-1", Set: map[string]string{"a": "b"}}, fault.Failure, "was revoked at"},
		{"bad key", LabelOptions{Name: "web-2", Set: map[string]string{"a b": "c"}}, fault.Usage, `invalid label "a b"="c"`},
		{"empty value", LabelOptions{Name: "web-2", Set: map[string]string{"a": ""}}, fault.Usage, `invalid label "a"=""`},
		{"bad removal", LabelOptions{Name: "web-2", Remove: []string{"a/b"}}, fault.Usage, `--remove "a/b"`},
		{"set and removed", LabelOptions{Name: "web-2", Set: map[string]string{"a": "b"}, Remove: []string{"a"}}, fault.Usage, "both set and removed"},
		{"nothing", LabelOptions{Name: "web-2"}, fault.Usage, "nothing to change"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.Now = t0.Add(time.Hour)
			_, err := Label(f.ctx, f.m, f.registry(), tc.o)
			if err == nil || !strings.Contains(err.Error(), tc.want) || fault.ClassOf(err) != tc.class {
				t.Errorf("err %v (class %v), want %q (class %v)", err, fault.ClassOf(err), tc.want, tc.class)
			}
		})
	}
	if n := countObjects(t, f, spool.EnrolLabelPrefix); n != 0 {
		t.Errorf("a refused change wrote %d records", n)
	}
}

// The story: someone able to write to the spool, but without the mesh
// key, tries to move a node into a role by dropping a label record, or by
// flipping a byte of a real one. Neither is applied; each is skipped and
// named.
func TestForgedLabelChangeSkipped(t *testing.T) {
	f := enrolWeb1(t, map[string]string{"role": "web"})
	id := f.registry().Enrolled("web-1")

	rogue, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	seq := uint64(t0.Add(time.Hour).UnixNano())
	forged := LabelChange{Version: recordVersion, NodeID: id.NodeID, Name: "web-1", Seq: seq, Set: map[string]string{"role": "db"}, At: t0.Add(time.Hour)}
	data, err := bundle.SealTOML(forged, labelCtx(id.NodeID, seq), rogue.Sign, f.m.Pair.Age.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	forgedName := spool.LabelName(id.NodeID, seq)
	f.put(forgedName, data)

	// A real change, then one byte of it flipped and filed as a later one.
	f.label(LabelOptions{Set: map[string]string{"site": "ams"}, Now: t0.Add(time.Minute)})
	realName := spool.LabelName(id.NodeID, uint64(t0.Add(time.Minute).UnixNano()))
	real, err := f.m.Spool.Get(f.ctx, realName, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Clone(real)
	tampered[len(tampered)/2] ^= 1
	tamperedName := spool.LabelName(id.NodeID, seq+1)
	f.put(tamperedName, tampered)
	// And the real one copied under another identity's name.
	movedName := spool.LabelName("0123456789abcdef0123456789abcdef", seq+2)
	f.put(movedName, real)

	reg := f.registry()
	want := map[string]string{"role": "web", "site": "ams"}
	if got := reg.Enrolled("web-1").Labels; !maps.Equal(got, want) {
		t.Errorf("labels %v, want %v: a forged change was applied", got, want)
	}
	all := strings.Join(reg.Skipped, "\n")
	for _, n := range []string{forgedName, tamperedName, movedName} {
		if !strings.Contains(all, n+" skipped") {
			t.Errorf("skipped %q does not name %s", all, n)
		}
	}
	if strings.Contains(all, realName+" ") {
		t.Errorf("the real change was skipped: %q", all)
	}
	// Junk stays for spool verify to show; nothing deletes it.
	if _, err := f.m.Spool.Stat(f.ctx, forgedName); errors.Is(err, spool.ErrNotFound) {
		t.Error("the forged record was deleted")
	}
}
