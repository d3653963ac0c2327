package enrol

import (
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

// A node whose briefing has a failed line is enrolled and ineligible, with
// the failed line; a newer briefing that passes makes it eligible.
func TestIneligibleThenEligible(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	_, config := f.hostDirs("a")
	if err := host.WriteConfig(config, &host.Config{Brief: host.BriefConfig{MinFreeRootMB: 1 << 40}}); err != nil {
		t.Fatal(err)
	}
	j := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	_, reg := f.admit(tAdmit)
	if reg.Enrolled("web-1") == nil {
		t.Fatal("a node with a failed briefing line was not enrolled")
	}
	briefs, _, err := reg.Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	b := briefs[j.NodeID]
	failed := outcome.FailedLines(b.Lines)
	if b.Eligible() || len(failed) != 1 || failed[0].ID != "free-root" || !strings.Contains(failed[0].Detail, "below the threshold") {
		t.Fatalf("briefing %+v: want ineligible with the free-root line failed", b)
	}
	// The operator lowers the threshold; the host briefs again.
	cfg, _ := f.identity("a")
	cfg.Brief.MinFreeRootMB = 1
	if err := host.WriteConfig(config, cfg); err != nil {
		t.Fatal(err)
	}
	f.sendBriefing("a", tAdmit.Add(time.Minute))
	briefs, _, err = f.registry().Briefings(f.ctx, f.m)
	if err != nil {
		t.Fatal(err)
	}
	if b := briefs[j.NodeID]; !b.Eligible() || !b.Time.Equal(tAdmit.Add(time.Minute)) {
		t.Errorf("newest briefing %+v: want the eligible one", b)
	}
}

// briefingWithOutcome is a briefing that carries its own verdict beside
// its lines, where it could disagree with them.
type briefingWithOutcome struct {
	brief.Briefing
	Outcome string `toml:"outcome"`
}

func TestBriefingDocuments(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	j := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	_, reg := f.admit(tAdmit)
	_, id := f.identity("a")
	failing := brief.Briefing{Version: brief.FormatVersion, Node: "web-1", Time: tAdmit,
		Lines: []outcome.Line{{ID: "free-root", Status: outcome.Failed, Detail: "full"}}}
	stranger, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		doc    any
		signer *keys.Pair
		want   string // in the refusal; "" if accepted
	}{
		{"carries its own outcome", briefingWithOutcome{Briefing: failing, Outcome: "eligible"}, id.Pair, "outcome"},
		{"signed by another key", failing, stranger, "signed by an unexpected key"},
		{"a line with an unknown status", brief.Briefing{Version: brief.FormatVersion, Node: "web-1", Lines: []outcome.Line{{ID: "os", Status: "fine"}}}, id.Pair, "unknown status"},
		{"no lines", brief.Briefing{Version: brief.FormatVersion, Node: "web-1"}, id.Pair, "no lines"},
		{"another format version", brief.Briefing{Version: 2, Node: "web-1", Lines: failing.Lines}, id.Pair, "format version"},
		{"a valid failing briefing", failing, id.Pair, ""},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			seq := uint64(tAdmit.UnixNano()) + uint64(i) + 1
			data, err := bundle.SealTOML(tt.doc, BriefCtx(j.NodeID, seq), tt.signer.Sign, f.m.Pair.Age.Recipient())
			if err != nil {
				t.Fatal(err)
			}
			f.put(spool.BriefName(j.NodeID, seq), data)
			b, err := reg.OpenBriefing(f.ctx, f.m, j.NodeID, seq)
			if tt.want == "" {
				if err != nil || b.Eligible() {
					t.Fatalf("open: %+v, %v; want the failing briefing", b, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("open: %+v, %v; want a refusal naming %q", b, err, tt.want)
			}
			briefs, refused, err := reg.Briefings(f.ctx, f.m)
			if err != nil {
				t.Fatal(err)
			}
			got := briefs[j.NodeID]
			if tt.signer == stranger {
				// Junk anyone could drop: skipped and named; the
				// host's own newest briefing before it stands (here
				// the one of the case before, which it signed).
				if strings.Contains(got.Lines[0].Detail, tt.want) || len(refused) != 1 || !strings.Contains(refused[0], tt.want) {
					t.Errorf("Briefings gave %+v, refused %q, for a briefing signed by another key", got, refused)
				}
				return
			}
			// The host's own word that does not check: as the newest
			// briefing, it makes the node ineligible with the reason,
			// and stops nothing else.
			if got.Eligible() || got.Lines[0].ID != "briefing" || !strings.Contains(got.Lines[0].Detail, tt.want) {
				t.Errorf("Briefings gave %+v for a refused briefing", got)
			}
		})
	}
}

// A briefing is bound to its node and name: one moved under another
// node's name is refused.
func TestBriefingMovedToAnotherNode(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	a := f.join("a", f.issue(IssueOptions{Name: "web-1"}), tJoin)
	b := f.join("b", f.issue(IssueOptions{Name: "web-2"}), tJoin)
	_, reg := f.admit(tAdmit)
	seq := uint64(tJoin.UnixNano())
	data, err := f.m.Spool.Get(f.ctx, spool.BriefName(a.NodeID, seq), 0)
	if err != nil {
		t.Fatal(err)
	}
	f.put(spool.BriefName(b.NodeID, seq+1), data)
	if _, err := reg.OpenBriefing(f.ctx, f.m, b.NodeID, seq+1); err == nil {
		t.Error("a briefing moved to another node was accepted")
	}
}
