package apply

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
	}
	want := ledger.Ledger{}
	for _, e := range entries {
		e.ID = e.Spec().ID()
		want[e.ID] = e
	}
	dir := t.TempDir()
	if err := saveLedger(dir, want); err != nil {
		t.Fatal(err)
	}
	got, ok, err := loadLedger(dir)
	if err != nil || !ok {
		t.Fatalf("load: %v, %v", ok, err)
	}
	if !sameLedger(got, want) {
		t.Errorf("round trip:\n got %v\nwant %v", got, want)
	}
	data, err := os.ReadFile(filepath.Join(dir, ledgerFile))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(entries) + 1; countLines(data) != n {
		t.Errorf("ledger has %d lines, want %d (one per entry and the header):\n%s", countLines(data), n, data)
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
	if err := saveLedger(dir, l); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, _, err := loadLedger(dir); err != nil {
			b.Fatal(err)
		}
	}
}
