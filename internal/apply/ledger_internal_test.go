package apply

import (
	"bytes"
	"crypto/ed25519"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/fault"

	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
)

// The ledger file keeps every entry exactly, whatever its path holds.
func TestLedgerRoundTrip(t *testing.T) {
	entries := []ledger.Entry{
		{Kind: resource.File, Path: "/etc/motd", Digest: "sha256:5e1a", Created: true},
		{Kind: resource.Directory, Path: "/srv/www"},
		{Kind: resource.Symlink, Path: "/srv/with\ttab", Created: true},
		{Kind: resource.File, Path: "/srv/with\nnewline", Digest: "sha256:00"},
		{Kind: resource.File, Path: "\"/srv/leading quote"},
		{Kind: resource.File, Path: "/srv/not-utf8-\xff"},
		{Kind: resource.File, Path: "/srv/ünïcode and spaces"},
		{Kind: resource.Package, Name: "nginx", Digest: "sha256:9c0d", Created: true},
		{Kind: resource.Service, Name: "nginx.service"},
		{Kind: resource.User, Name: "deploy", Digest: "sha256:77", Created: true},
		{Kind: resource.Group, Name: "web", Created: true},
	}
	want := ledger.Ledger{}
	for _, e := range entries {
		e.ID = e.Spec().ID()
		want[e.ID] = e
	}
	dir := t.TempDir()
	key := testKey(t)
	if err := saveLedger(dir, key, want); err != nil {
		t.Fatal(err)
	}
	got, ids, ok, err := loadLedger(dir, key)
	if err != nil || !ok {
		t.Fatalf("load: %v, %v", ok, err)
	}
	if !sameLedger(got, want) {
		t.Errorf("round trip:\n got %v\nwant %v", got, want)
	}
	// The file lists the entries by id: their order is Entries' without
	// a sort.
	if es := got.InOrder(ids); !reflect.DeepEqual(es, want.Entries()) {
		t.Errorf("the file's order is not the entries' sorted:\n got %v\nwant %v", es, want.Entries())
	}
	data, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(entries) + 2; countLines(data) != n {
		t.Errorf("ledger has %d lines, want %d (one per entry, the header and the mac):\n%s", countLines(data), n, data)
	}
}

func testKey(t testing.TB) stateKey {
	_, sign, err := ed25519.GenerateKey(nil)
	if err != nil {
		t.Fatal(err)
	}
	k, err := newStateKey(sign)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// The state files are authenticated under the host's key: an edit, a
// file of another host, a file cut short or without its line is refused,
// never read as state.
func TestStateFilesAuthenticated(t *testing.T) {
	dir := t.TempDir()
	key := testKey(t)
	st := &State{Generation: 3, Run: "0123456789abcdef", Commit: "sha256:00"}
	if err := saveState(dir, key, st); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := loadState(dir, key); err != nil || !ok || got.Generation != 3 {
		t.Fatalf("load: %+v %v %v", got, ok, err)
	}
	path := filepath.Join(dir, stateFile)
	good, _ := os.ReadFile(path)
	for name, data := range map[string][]byte{
		"generation edited": bytes.Replace(good, []byte("generation = 3"), []byte("generation = 2"), 1),
		"line removed":      good[:bytes.LastIndex(good, []byte(keys.MACPrefix))],
		"cut short":         good[:len(good)-5],
		"another host's":    append(testKey(t).seal(good[:bytes.LastIndex(good, []byte(keys.MACPrefix))])[:0:0], testKey(t).seal(good[:bytes.LastIndex(good, []byte(keys.MACPrefix))])...),
	} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		_, _, err := loadState(dir, key)
		if err == nil || !strings.Contains(err.Error(), "does not authenticate") || !strings.Contains(fault.HintOf(err), "mv "+path) {
			t.Errorf("%s: %v", name, err)
		}
	}
	l := ledger.Ledger{}
	e := ledger.Entry{Kind: resource.File, Path: "/etc/motd", Created: true}
	e.ID = e.Spec().ID()
	l[e.ID] = e
	if err := saveLedger(dir, key, l); err != nil {
		t.Fatal(err)
	}
	lpath := filepath.Join(dir, ledgerFile)
	data, _ := os.ReadFile(lpath)
	os.WriteFile(lpath, bytes.Replace(data, []byte("created"), []byte("-"), 1), 0o600)
	if _, _, _, err := loadLedger(dir, key); err == nil || !strings.Contains(err.Error(), "does not authenticate") {
		t.Errorf("ledger edited: %v", err)
	}
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}

func BenchmarkLedgerLoad1000(b *testing.B) {
	l := ledger.Ledger{}
	for i := range 1000 {
		e := ledger.Entry{Kind: resource.File, Path: fmt.Sprintf("/bench/f%05d", i), Digest: "sha256:2874bd1a3ec0b77210011b8b7b2874bd1a3ec0b77210011b8b7b2874bd1a", Created: true}
		e.ID = e.Spec().ID()
		l[e.ID] = e
	}
	dir := b.TempDir()
	key := testKey(b)
	if err := saveLedger(dir, key, l); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, _, err := loadLedger(dir, key); err != nil {
			b.Fatal(err)
		}
	}
}

// ledgerTally says the ledger after a run is the one before only when it
// holds exactly the same entries: one entry changed (its digest, whether
// the host created it), one gone (declared absent now, or an orphan), or
// one new each make it another ledger.
func TestLedgerTally(t *testing.T) {
	led := ledger.Ledger{}
	var entries []ledger.Entry
	for i := range 4 {
		e := ledger.Entry{ID: fmt.Sprintf("file:/etc/f%d", i), Kind: resource.File, Path: fmt.Sprintf("/etc/f%d", i), Digest: fmt.Sprintf("sha256:%064d", i)}
		led[e.ID], entries = e, append(entries, e)
	}
	// sameEntries tallies a run whose results are es, each owned unless
	// absent says otherwise, as reconcile does.
	sameEntries := func(es []ledger.Entry, absent int) bool {
		var t ledgerTally
		for i, e := range es {
			if i != absent {
				old, owned := led[e.ID]
				t.add(e, old, owned)
			}
		}
		return t.sameAs(led)
	}
	if !sameEntries(entries, -1) {
		t.Error("the same entries were not the same ledger")
	}
	changed := slices.Clone(entries)
	changed[2].Digest = "sha256:" + strings.Repeat("f", 64)
	created := slices.Clone(entries)
	created[1].Created = true
	extra := append(slices.Clone(entries), ledger.Entry{ID: "file:/etc/new", Kind: resource.File, Path: "/etc/new"})
	for name, c := range map[string]struct {
		es     []ledger.Entry
		absent int
	}{
		"a digest changed":    {changed, -1},
		"created changed":     {created, -1},
		"one declared absent": {entries, 3},
		"one an orphan":       {entries[:3], -1},
		"one new":             {extra, -1},
	} {
		if sameEntries(c.es, c.absent) {
			t.Errorf("%s: taken for the same ledger", name)
		}
	}
}

// An entry listed twice is refused, next to itself or apart (a ledger
// whose lines are not in id order, which saveLedger never writes).
func TestParseLedgerRefusesAnEntryTwice(t *testing.T) {
	a, b, c := "file\t/etc/a\t-\t-\n", "file\t/etc/b\t-\t-\n", "file\t/etc/c\t-\t-\n"
	for name, text := range map[string]string{
		"next to itself":          ledgerHeader + "\n" + a + a,
		"apart":                   ledgerHeader + "\n" + a + b + a,
		"after the order is lost": ledgerHeader + "\n" + b + c + a + b,
	} {
		if _, _, err := parseLedger(text); err == nil || !strings.Contains(err.Error(), "listed twice") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if l, ids, err := parseLedger(ledgerHeader + "\n" + b + a); err != nil || len(l) != 2 || l.InOrder(ids) != nil {
		t.Errorf("out of id order: %v, %v, %v", l, ids, err)
	}
}

// Whatever the ledger file holds, parseLedger refuses it or returns entries
// that formatLedger writes back as a file parsing to the same entries, and
// never panics. A ledger it accepts has each entry under its own id.
func FuzzParseLedger(f *testing.F) {
	f.Add(ledgerHeader + "\n")
	f.Add(ledgerHeader + "\n" +
		"file\t\"\\\"/srv/leading quote\"\t-\t-\n" +
		"file\t/etc/motd\tcreated\tsha256:5e1a\n" +
		"package\tnginx\t-\tsha256:9c0d\n" +
		"symlink\t\"/srv/with\\ttab\"\t-\t-\n" +
		"user\tdeploy\tcreated\t-\n")
	f.Add(ledgerHeader + "\nfile\t/etc/b\t-\t-\nfile\t/etc/a\t-\t-\nfile\t/etc/b\t-\t-\n")
	f.Fuzz(func(t *testing.T, text string) {
		got, ids, err := parseLedger(text)
		if err != nil {
			return
		}
		if len(ids) != len(got) {
			t.Fatalf("%d ids for %d entries", len(ids), len(got))
		}
		for id, e := range got {
			if e.ID != id || e.Spec().ID() != id {
				t.Fatalf("entry %+v under id %q", e, id)
			}
		}
		again, ids2, err := parseLedger(string(formatLedger(got)))
		if err != nil {
			t.Fatalf("the ledger written back does not parse: %v\n%q", err, formatLedger(got))
		}
		if !sameLedger(again, got) {
			t.Fatalf("written back and read again:\n got %v\nwant %v", again, got)
		}
		if again.InOrder(ids2) == nil {
			t.Fatalf("the ledger written back is not in id order: %q", ids2)
		}
	})
}
