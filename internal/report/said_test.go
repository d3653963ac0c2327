package report

import (
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/outcome"
)

// Said is the digest of the report's encoding with its times left out,
// however many lines it holds: two runs that say the same thing at other
// times have one Said, and any other word makes another.
func TestSaid(t *testing.T) {
	r := &Report{Version: FormatVersion, Node: "web-1", NodeID: "n1", Generation: 3, Muster: "1.0", NewestSeen: 3,
		Start: time.Unix(100, 0), End: time.Unix(101, 0)}
	for i := range 5000 {
		p := fmt.Sprintf("/etc/app/%05d.conf", i)
		r.Lines = append(r.Lines, outcome.Line{ID: "file:" + p, Status: outcome.OK, Digest: "sha256:ab"})
		r.Ledger = append(r.Ledger, ledger.Entry{ID: "file:" + p, Kind: "file", Path: p, Digest: "sha256:ab", Created: true})
	}
	timeless := *r
	timeless.Start, timeless.End = time.Time{}, time.Time{}
	if Said(r) != sha256.Sum256(Marshal(&timeless)) {
		t.Fatal("Said is not the digest of the encoding without times")
	}
	small := timeless
	small.Lines, small.Ledger = r.Lines[:3], r.Ledger[:3]
	if Said(&small) != sha256.Sum256(Marshal(&small)) {
		t.Fatal("Said of a small report is not the digest of its encoding")
	}
	later := *r
	later.Start, later.End = r.Start.Add(time.Hour), r.End.Add(time.Hour)
	if Said(&later) != Said(r) {
		t.Error("the same report at another time has another Said")
	}
	other := *r
	other.Lines = append([]outcome.Line(nil), r.Lines...)
	other.Lines[4321].Status = outcome.Changed
	if Said(&other) == Said(r) {
		t.Error("a line of another status has the same Said")
	}
}
