package brief_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/spool"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// lineIDs is every check a briefing makes, in order.
var lineIDs = []string{"os", "arch", "package-manager", "init", "free-state", "free-root", "clock", "spool", "muster"}

// goodEnv is a host whose every check passes: a root with an os-release
// and a dpkg status file, a state directory, and the mesh's spool.
func goodEnv(t *testing.T) brief.Env {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	for _, d := range []string{"etc", "var/lib/dpkg"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "etc/os-release"), []byte("NAME=Debian\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	sp := filepath.Join(dir, "spool")
	for _, d := range []string{state, sp} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	m, err := mesh.Init(context.Background(), filepath.Join(dir, "mesh"), sp, t0)
	if err != nil {
		t.Fatal(err)
	}
	return brief.Env{Node: "web-1", Root: root, State: state, Spool: m.Spool, MeshCreated: t0,
		MinFreeStateMB: 1, MinFreeRootMB: 1, Version: "1.2.3", Now: t0.Add(time.Hour)}
}

func TestRunLines(t *testing.T) {
	base := goodEnv(t)
	emptySpool, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		change func(e *brief.Env)
		failed string // the line that fails; "" if eligible
		detail string // in that line's detail
	}{
		{"every check passes", func(*brief.Env) {}, "", ""},
		{"free space on the root below its threshold", func(e *brief.Env) { e.MinFreeRootMB = 1 << 40 }, "free-root", "below the threshold of 1099511627776 MiB"},
		{"free space on the state below its threshold", func(e *brief.Env) { e.MinFreeStateMB = 1 << 40 }, "free-state", "below the threshold"},
		{"no state directory", func(e *brief.Env) { e.State = filepath.Join(e.State, "missing") }, "free-state", "cannot read free space"},
		{"no dpkg database", func(e *brief.Env) { e.Root = t.TempDir() }, "package-manager", "not readable"},
		{"clock before the mesh was created", func(e *brief.Env) { e.Now = t0.Add(-time.Hour) }, "clock", "before the mesh was created"},
		{"clock far in the future", func(e *brief.Env) { e.Now = time.Date(2150, 1, 1, 0, 0, 0, 0, time.UTC) }, "clock", "2150"},
		{"no spool", func(e *brief.Env) { e.Spool = nil }, "spool", "no spool configured"},
		{"a spool without the mesh keys", func(e *brief.Env) { e.Spool = emptySpool }, "spool", "not readable"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := base
			tt.change(&e)
			b := brief.Run(context.Background(), e)
			var ids []string
			for _, l := range b.Lines {
				ids = append(ids, l.ID)
			}
			if strings.Join(ids, " ") != strings.Join(lineIDs, " ") {
				t.Fatalf("lines %v, want %v", ids, lineIDs)
			}
			if err := b.Check(); err != nil {
				t.Fatalf("a briefing from Run does not check: %v", err)
			}
			failed := outcome.FailedLines(b.Lines)
			if tt.failed == "" {
				if len(failed) != 0 || !b.Eligible() || b.Outcome() != outcome.Passed {
					t.Fatalf("failed lines %+v, want none", failed)
				}
				return
			}
			if len(failed) != 1 || failed[0].ID != tt.failed || !strings.Contains(failed[0].Detail, tt.detail) {
				t.Fatalf("failed lines %+v, want %s with %q", failed, tt.failed, tt.detail)
			}
			if b.Eligible() || b.Outcome() != outcome.Failing {
				t.Error("a briefing with a failed line is eligible")
			}
		})
	}
	// A missing os-release is a warning: the node stays eligible.
	e := base
	e.Root = t.TempDir()
	if err := os.MkdirAll(filepath.Join(e.Root, "var/lib/dpkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Root, "var/lib/dpkg/status"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	b := brief.Run(context.Background(), e)
	if b.Lines[0].Status != outcome.Warn || !b.Eligible() {
		t.Errorf("no os-release: %+v, want a warning and eligible", b.Lines[0])
	}
	good := brief.Run(context.Background(), base)
	if good.Lines[0].Detail != "Debian GNU/Linux 12 (bookworm)" || good.Muster != "1.2.3" || good.Node != "web-1" || !good.Time.Equal(t0.Add(time.Hour)) {
		t.Errorf("briefing %+v", good)
	}
}

// The outcome is computed from the lines by outcome.Of: warnings pass, a
// failed line or one whose status is not understood fails.
func TestOutcomeIsComputedFromLines(t *testing.T) {
	tests := []struct {
		statuses []outcome.Status
		eligible bool
	}{
		{[]outcome.Status{outcome.OK, outcome.OK}, true},
		{[]outcome.Status{outcome.OK, outcome.Warn}, true},
		{[]outcome.Status{outcome.OK, outcome.Failed}, false},
		{[]outcome.Status{outcome.OK, "eligible"}, false},
	}
	for _, tt := range tests {
		b := &brief.Briefing{Version: brief.FormatVersion}
		for i, s := range tt.statuses {
			b.Lines = append(b.Lines, outcome.Line{ID: string(rune('a' + i)), Status: s})
		}
		if b.Eligible() != tt.eligible || b.Outcome() != outcome.Of(b.Lines) {
			t.Errorf("lines %v: eligible %v, outcome %s; want %v and outcome.Of's %s", tt.statuses, b.Eligible(), b.Outcome(), tt.eligible, outcome.Of(b.Lines))
		}
	}
}

// A briefing document never carries its outcome.
func TestDocumentHasNoOutcome(t *testing.T) {
	b := brief.Run(context.Background(), goodEnv(t))
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(b); err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if _, err := toml.Decode(buf.String(), &doc); err != nil {
		t.Fatal(err)
	}
	for k := range doc {
		if k != "version" && k != "node" && k != "time" && k != "muster" && k != "line" && k != "facts" {
			t.Errorf("briefing document has key %q", k)
		}
	}
}
