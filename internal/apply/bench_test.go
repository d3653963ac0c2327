package apply_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/spool"
)

// The workload of the README's performance figures, run in-process: one
// directory and n files of 200 bytes, mode 0644, root:root. The command
// line's figures (process start-up included) come from bench/apply/run.sh.

// filesDeclaration declares directory /bench and n files in it; salt
// changes every file's content.
func filesDeclaration(n int, salt string) string {
	var b strings.Builder
	b.WriteString(everyNode)
	b.WriteString("[role.all.directory.\"/bench\"]\nmode = \"0755\"\nowner = \"root\"\ngroup = \"root\"\n\n")
	for i := range n {
		line := fmt.Sprintf("muster-bench file %05d %s ", i, salt)
		content := line + strings.Repeat("x", 199-len(line))
		fmt.Fprintf(&b, "[role.all.file.\"/bench/f%05d\"]\ncontent = \"%s\\n\"\nmode = \"0644\"\nowner = \"root\"\ngroup = \"root\"\n\n", i, content)
	}
	return b.String()
}

func benchFixture(b *testing.B, n int) (*fixture, *testHost) {
	b.Helper()
	f := newFixture(b)
	h := f.enrol("bench-1")
	f.declare(filesDeclaration(n, "a"))
	res := f.mustApply(h)
	if res.Failed > 0 || res.Changed != n+1 {
		b.Fatalf("first apply: %d changed, %d failed", res.Changed, res.Failed)
	}
	return f, h
}

func benchNoop(b *testing.B, n int) {
	f, h := benchFixture(b, n)
	f.mustApply(h) // reports its lines now unchanged
	b.ResetTimer()
	for b.Loop() {
		res := f.mustApply(h)
		// Nothing new to report: no report is due (see REQUESTS in
		// muster-apply(1)).
		if res.Changed != 0 || res.Failed != 0 || res.Sent {
			b.Fatalf("no-op apply: %d changed, %d failed, sent %v", res.Changed, res.Failed, res.Sent)
		}
	}
}

func BenchmarkApplyNoop1000(b *testing.B)  { benchNoop(b, 1000) }
func BenchmarkApplyNoop10000(b *testing.B) { benchNoop(b, 10000) }

func BenchmarkApplyFirst1000(b *testing.B) {
	f, h := benchFixture(b, 1000)
	dir := filepath.Join(h.root, "bench")
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		if err := os.RemoveAll(dir); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		res := f.mustApply(h)
		if res.Changed != 1001 || res.Failed != 0 {
			b.Fatalf("first apply: %d changed, %d failed", res.Changed, res.Failed)
		}
	}
}

func BenchmarkApplyDrift10of1000(b *testing.B) {
	f, h := benchFixture(b, 1000)
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		for i := 0; i < 1000; i += 100 {
			writeFile(b, filepath.Join(h.root, fmt.Sprintf("bench/f%05d", i)), "edited by hand\n")
		}
		b.StartTimer()
		res := f.mustApply(h)
		if res.Changed != 10 || res.Failed != 0 {
			b.Fatalf("drift repair: %d changed, %d failed", res.Changed, res.Failed)
		}
	}
}

// The parts of a no-op apply that other packages own, for the figures the
// README quotes: opening a 1,000-resource declaration bundle (what the
// declaration cache saves on a re-apply), and sealing the report of 1,000
// lines and ledger entries (paid on every run).
func BenchmarkPartsOpenDeclaration1000(b *testing.B) {
	f, h := benchFixture(b, 1000)
	o := f.options(h)
	gens, err := generation.Committed(f.ctx, o.Spool)
	if err != nil {
		b.Fatal(err)
	}
	c, err := generation.ReadCommit(f.ctx, o.Spool, gens[0], f.meshKey())
	if err != nil {
		b.Fatal(err)
	}
	nodeID := o.Identity.NodeID()
	data, err := o.Spool.Get(f.ctx, spool.DeclName(gens[0], c.Run, nodeID), 0)
	if err != nil {
		b.Fatal(err)
	}
	ctx := generation.DeclCtx(gens[0], c.Run, nodeID)
	b.Run("open", func(b *testing.B) {
		for b.Loop() {
			if _, err := bundle.Open(data, ctx, o.Identity.Pair.Age, f.meshKey()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("open+toml", func(b *testing.B) {
		for b.Loop() {
			var nd generation.NodeDeclaration
			if err := bundle.OpenTOML(data, ctx, o.Identity.Pair.Age, f.meshKey(), &nd); err != nil {
				b.Fatal(err)
			}
		}
	})
}

func BenchmarkPartsSealReport1000(b *testing.B) {
	f, h := benchFixture(b, 1000)
	reps := f.reports(h)
	rep := reps[len(reps)-1]
	o := f.options(h)
	rcpt, err := o.Identity.Mesh.Recipient()
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := bundle.SealTOML(rep, report.Ctx(rep.NodeID, rep.Generation, 1), o.Identity.Pair.Sign, rcpt); err != nil {
			b.Fatal(err)
		}
	}
}
