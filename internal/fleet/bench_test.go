package fleet

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"filippo.io/age"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/gcpace"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/outcome"
	"github.com/muster-tool/muster/internal/report"
	"github.com/muster-tool/muster/internal/testutil/simfleet"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// The benchmarks measure `muster report` the way it runs: each load is a
// child process (this test binary running TestBenchChild), so its wall
// time and peak RSS are those of one report run, not of the benchmark
// that built the spool.
//
// The spool has MUSTER_REPORT_BENCH=REPORTS/NODES reports (default
// 10000/1000: one report per node per generation, so REPORTS/NODES
// generations). The budget, at 100000/10000 on 2 cores: the first report
// within 30 s, the next with nothing new within 1 s, peak RSS within
// 512 MiB. Building the spool is slow (every report is sealed for real),
// so it is built once per test binary, or once for good in
// MUSTER_REPORT_BENCH_DIR when that is set, or in the fleet cache (see
// internal/testutil/simfleet) when MUSTER_BENCH_FLEET=1 is:
//
//	MUSTER_REPORT_BENCH=100000/10000 go test -run '^$' -bench Report -benchtime 3x ./internal/fleet

type benchHost struct {
	Name   string
	Public keys.Public
	// Seed is the host's signing key, so that a spool kept from an
	// earlier run can take new reports (test keys of a simulated fleet).
	Seed []byte
}

type benchEnv struct {
	dir            string
	reports, nodes int
	generations    int
	hosts          []benchHost
	pairs          []*keys.Pair
	built          time.Duration
	extraSeq       uint64
}

var (
	benchOnce   sync.Once
	benchShared *benchEnv
	benchErr    error
	benchTemp   string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if benchTemp != "" {
		os.RemoveAll(benchTemp)
	}
	os.Exit(code)
}

func benchSize() (reports, nodes int, err error) {
	spec := os.Getenv("MUSTER_REPORT_BENCH")
	if spec == "" {
		return 10000, 1000, nil
	}
	r, n, ok := strings.Cut(spec, "/")
	reports, err1 := strconv.Atoi(r)
	nodes, err2 := strconv.Atoi(n)
	if !ok || err1 != nil || err2 != nil || nodes <= 0 || reports < nodes || reports%nodes != 0 {
		return 0, 0, fmt.Errorf("MUSTER_REPORT_BENCH=%q: want REPORTS/NODES, REPORTS a multiple of NODES", spec)
	}
	return reports, nodes, nil
}

func benchSpool(b *testing.B) *benchEnv {
	benchOnce.Do(func() {
		reports, nodes, err := benchSize()
		if err != nil {
			benchErr = err
			return
		}
		dir := os.Getenv("MUSTER_REPORT_BENCH_DIR")
		if dir == "" && os.Getenv("MUSTER_BENCH_FLEET") == "1" {
			dir = simfleet.Root(b)
		}
		if dir == "" {
			if benchTemp, benchErr = os.MkdirTemp("", "muster-report-bench-"); benchErr != nil {
				return
			}
			dir = benchTemp
		} else {
			dir = filepath.Join(dir, fmt.Sprintf("reports-%d-%d-v2", reports, nodes))
		}
		benchShared, benchErr = buildBenchSpool(dir, reports, nodes)
		if benchErr == nil {
			benchErr = benchShared.enrolment(dir)
		}
		if benchErr != nil || benchTemp != "" {
			return
		}
		// A spool kept between runs is worked on through a copy of
		// hard links: the benchmarks add reports and caches, which
		// the next run must not find.
		if benchTemp, benchErr = os.MkdirTemp("", "muster-report-bench-"); benchErr != nil {
			return
		}
		simfleet.Link(b, filepath.Join(dir, "spool"), filepath.Join(benchTemp, "spool"))
		simfleet.Copy(b, filepath.Join(dir, "mesh"), filepath.Join(benchTemp, "mesh"))
		if os.RemoveAll(filepath.Join(benchTemp, "mesh", "cache")) == nil {
			benchErr = os.Link(filepath.Join(dir, "hosts.json"), filepath.Join(benchTemp, "hosts.json"))
		}
		// The copy written back before anything is timed: the kernel
		// writing a million new links out took the disk and a CPU from
		// the first runs after it.
		syscall.Sync()
		benchShared.dir = benchTemp
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	return benchShared
}

// buildBenchSpool writes a spool of reports. Commits and manifests go
// through Put; briefings and reports, by the hundred thousand, are written
// straight into the directory layout (spool/doc.go), without Put's fsyncs.
func buildBenchSpool(dir string, reports, nodes int) (*benchEnv, error) {
	ctx := context.Background()
	e := &benchEnv{dir: dir, reports: reports, nodes: nodes, generations: reports / nodes}
	hostsFile := filepath.Join(dir, "hosts.json")
	if data, err := os.ReadFile(hostsFile); err == nil {
		// Built by an earlier run in MUSTER_REPORT_BENCH_DIR.
		if err := json.Unmarshal(data, &e.hosts); err != nil {
			return nil, err
		}
		e.pairs = make([]*keys.Pair, len(e.hosts))
		for i, h := range e.hosts {
			if len(h.Seed) == ed25519.SeedSize {
				e.pairs[i] = &keys.Pair{Sign: ed25519.NewKeyFromSeed(h.Seed)}
			}
		}
		return e, nil
	}
	start := time.Now()
	sdir := filepath.Join(dir, "spool")
	if err := os.MkdirAll(sdir, 0o755); err != nil {
		return nil, err
	}
	m, err := mesh.Init(ctx, filepath.Join(dir, "mesh"), sdir, t0)
	if err != nil {
		return nil, err
	}
	rcpt := m.Pair.Age.Recipient()
	e.hosts = make([]benchHost, nodes)
	e.pairs = make([]*keys.Pair, nodes)
	for i := range nodes {
		p, err := keys.Generate()
		if err != nil {
			return nil, err
		}
		e.pairs[i] = p
		e.hosts[i] = benchHost{Name: fmt.Sprintf("node-%05d", i), Public: p.Public(), Seed: p.Sign.Seed()}
	}
	for g := 1; g <= e.generations; g++ {
		gen := uint64(g)
		run := fmt.Sprintf("run%04d", g)
		at := t0.Add(time.Duration(g) * time.Hour)
		man := generation.Manifest{Version: generation.FormatVersion, Generation: gen, Run: run, DeclaredAt: at}
		for i, h := range e.hosts {
			man.Nodes = append(man.Nodes, generation.ManifestNode{Name: h.Name, NodeID: h.Public.Fingerprint(), Digest: fmt.Sprintf("%064x", i),
				Resources: map[string]string{"file:/etc/motd": "sha256:aa", "package:nginx": "sha256:bb", "service:nginx": "sha256:cc"}})
		}
		data, err := bundle.SealTOML(man, generation.ManifestCtx(gen, run), m.Pair.Sign, rcpt)
		if err != nil {
			return nil, err
		}
		if err := m.Spool.Put(ctx, spool.ManifestName(gen, run), data); err != nil {
			return nil, err
		}
		c := generation.Commit{Version: generation.FormatVersion, Generation: gen, Run: run, DeclaredAt: at}
		if data, err = bundle.SignTOML(c, generation.CommitCtx(gen), m.Pair.Sign); err != nil {
			return nil, err
		}
		if err := m.Spool.Put(ctx, spool.CommitName(gen), data); err != nil {
			return nil, err
		}
	}
	err = workpool.Run(ctx, nodes, runtime.GOMAXPROCS(0), func(i int) error {
		h, p := e.hosts[i], e.pairs[i]
		id := h.Public.Fingerprint()
		b := brief.Briefing{Version: brief.FormatVersion, Node: h.Name, Time: t0, Muster: "1.0.0", Lines: []outcome.Line{
			{ID: "os", Status: outcome.OK, Detail: "Debian GNU/Linux 12 (bookworm)"}, {ID: "free-root", Status: outcome.OK, Detail: "2048 MiB free"}}}
		data, err := bundle.SealTOML(b, enrol.BriefCtx(id, 1), p.Sign, rcpt)
		if err != nil {
			return err
		}
		if err := writeObject(sdir, spool.BriefName(id, 1), data); err != nil {
			return err
		}
		for g := 1; g <= e.generations; g++ {
			if err := e.writeReport(sdir, rcpt, i, uint64(g), 1); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	data, err := json.Marshal(e.hosts)
	if err != nil {
		return nil, err
	}
	e.built = time.Since(start)
	return e, os.WriteFile(hostsFile, data, 0o644)
}

// enrolment writes what admission leaves in the spool for each host, once
// for a spool kept between runs: its admission record, as admit writes
// it, and its join request, which stays beside it. report opens every
// admission (the registry) and lists every join request (to count those
// still pending) but never reads an admitted one, so the join requests
// hold a placeholder, not a sealed request.
func (e *benchEnv) enrolment(dir string) error {
	marker := filepath.Join(dir, "enrolment-v1")
	if _, err := os.Stat(marker); err == nil {
		return nil
	}
	ctx := context.Background()
	m, err := mesh.Open(ctx, filepath.Join(dir, "mesh"), filepath.Join(dir, "spool"))
	if err != nil {
		return err
	}
	sdir := filepath.Join(dir, "spool")
	err = workpool.Run(ctx, len(e.hosts), runtime.GOMAXPROCS(0), func(i int) error {
		h := e.hosts[i]
		tid, fp := fmt.Sprintf("%032x", i+1), h.Public.Fingerprint()
		name, data, err := enrol.SealAdmission(m, &enrol.Admission{TokenID: tid, Name: h.Name, NodeID: fp, Host: h.Public, AdmittedAt: t0})
		if err != nil {
			return err
		}
		if err := writeObject(sdir, name, data); err != nil {
			return err
		}
		return writeObject(sdir, spool.JoinName(tid, fp), []byte("placeholder: never read once admitted\n"))
	})
	if err != nil {
		return err
	}
	return os.WriteFile(marker, nil, 0o644)
}

// writeReport writes a realistic report: a dozen lines, a ledger of ten
// entries, and a failed line for one node in twenty.
func (e *benchEnv) writeReport(sdir string, rcpt age.Recipient, i int, gen, seq uint64) error {
	h, p := e.hosts[i], e.pairs[i]
	if p == nil {
		return fmt.Errorf("the spool in %s was built by an earlier run: new reports need its keys, so remove it", e.dir)
	}
	id := h.Public.Fingerprint()
	at := t0.Add(time.Duration(gen)*time.Hour + time.Duration(i)*time.Millisecond)
	r := report.Report{Version: report.FormatVersion, Node: h.Name, NodeID: id, Generation: gen, Start: at.Add(-3 * time.Second), End: at, Muster: "1.0.0", NewestSeen: gen}
	for k := range 10 {
		path := fmt.Sprintf("/etc/app/conf.d/%02d.conf", k)
		r.Lines = append(r.Lines, outcome.Line{ID: "file:" + path, Status: outcome.OK, Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"})
		r.Ledger = append(r.Ledger, ledger.Entry{ID: "file:" + path, Kind: "file", Path: path, Digest: "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", Created: true})
	}
	r.Lines = append(r.Lines, outcome.Line{ID: "package:nginx", Status: outcome.OK, Detail: "1.22.1-9"}, outcome.Line{ID: "service:nginx", Status: outcome.Changed, Detail: "restarted"})
	if i%20 == 0 {
		r.Lines[11] = outcome.Line{ID: "service:nginx", Status: outcome.Failed, Detail: "nginx.service is not active after start: failed (Result: exit-code)"}
	}
	data, err := bundle.Seal(report.Marshal(&r), report.Ctx(id, gen, seq), p.Sign, rcpt)
	if err != nil {
		return err
	}
	return writeObject(sdir, spool.ReportName(id, gen, seq), data)
}

func writeObject(sdir, name string, data []byte) error {
	file := filepath.Join(sdir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	return os.WriteFile(file, data, 0o444)
}

// childResult is what TestBenchChild prints.
type childResult struct {
	Stats  Stats
	Totals Totals
	Wall   time.Duration
	CPU    time.Duration // user and system time of the whole run
	// Registry is the part of Wall spent loading the registry, before
	// the reports (the pending joins are counted while they load).
	Registry time.Duration
}

// TestBenchChild is one report run for the benchmarks; it does nothing in
// a normal test run.
func TestBenchChild(t *testing.T) {
	dir := os.Getenv("MUSTER_REPORT_BENCH_CHILD")
	if dir == "" {
		t.Skip("run by the benchmarks only")
	}
	// As muster report does.
	gcpace.ForReading()
	start := time.Now()
	ctx := context.Background()
	m, err := mesh.Open(ctx, filepath.Join(dir, "mesh"), filepath.Join(dir, "spool"))
	if err != nil {
		t.Fatal(err)
	}
	// As muster report does (runReport in internal/cli): the report
	// cache read and the spool listed while the registry is loaded from
	// the spool's admissions, and the join requests still pending
	// counted while the load finishes.
	ld := Start(ctx, m, Options{CacheDir: filepath.Join(dir, "mesh", "cache")})
	reg, err := enrol.LoadRegistry(ctx, m)
	if err != nil {
		t.Fatal(err)
	}
	registry := time.Since(start)
	pending := make(chan error, 1)
	go func() {
		n, err := enrol.Pending(ctx, m, reg)
		if err == nil && n != 0 {
			err = fmt.Errorf("%d join requests pending, want none", n)
		}
		pending <- err
	}()
	s, err := ld.Finish(reg)
	if err != nil {
		t.Fatal(err)
	}
	if err := <-pending; err != nil {
		t.Fatal(err)
	}
	v, err := s.Generation(ctx, 0, Selection{})
	if err != nil {
		t.Fatal(err)
	}
	if p := os.Getenv("MUSTER_REPORT_BENCH_HEAP"); p != "" {
		// What the state holds once it is loaded.
		runtime.GC()
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		if err := pprof.WriteHeapProfile(f); err != nil {
			t.Fatal(err)
		}
		f.Close()
		runtime.KeepAlive(s)
	}
	out, _ := json.Marshal(childResult{Stats: s.Stats, Totals: v.Totals, Wall: time.Since(start), Registry: registry})
	fmt.Printf("\nRESULT %s\n", out)
}

// runChild runs one report in a child process and reports its wall time
// and peak RSS.
func runChild(b *testing.B, e *benchEnv) (childResult, float64) {
	cmd := exec.Command(os.Args[0], "-test.run", "^TestBenchChild$", "-test.count", "1")
	cmd.Env = append(os.Environ(), "MUSTER_REPORT_BENCH_CHILD="+e.dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		b.Fatalf("report run: %v\n%s", err, out)
	}
	_, after, ok := strings.Cut(string(out), "RESULT ")
	if !ok {
		b.Fatalf("report run printed no result:\n%s", out)
	}
	var r childResult
	if err := json.Unmarshal([]byte(strings.SplitN(after, "\n", 2)[0]), &r); err != nil {
		b.Fatal(err)
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	r.CPU = time.Duration(syscall.TimevalToNsec(ru.Utime) + syscall.TimevalToNsec(ru.Stime))
	return r, float64(ru.Maxrss) / 1024 // KiB on Linux
}

func (e *benchEnv) check(b *testing.B, r childResult) {
	if r.Stats.Reports != e.reports+int(e.extraSeq)*e.nodes/100 || r.Totals.Nodes != e.nodes || r.Totals.Applied+r.Totals.Failed != e.nodes {
		b.Fatalf("the report run saw %+v, totals %+v", r.Stats, r.Totals)
	}
}

func reportMetrics(b *testing.B, r childResult, rss float64) {
	b.ReportMetric(r.Wall.Seconds(), "report-s")
	b.ReportMetric(r.Registry.Seconds(), "registry-s")
	b.ReportMetric(r.CPU.Seconds(), "cpu-s")
	b.ReportMetric(rss, "peak-MiB")
	b.ReportMetric(float64(r.Stats.ReportsRead), "reports-read")
	b.ReportMetric(float64(r.Stats.DirsRead), "dirs-read")
}

// BenchmarkReportFirst: a report with no cache reads every object.
func BenchmarkReportFirst(b *testing.B) {
	e := benchSpool(b)
	b.Logf("spool of %d reports from %d nodes (built in %v)", e.reports, e.nodes, e.built)
	var r childResult
	var rss float64
	for b.Loop() {
		os.RemoveAll(filepath.Join(e.dir, "mesh", "cache"))
		r, rss = runChild(b, e)
	}
	e.check(b, r)
	reportMetrics(b, r, rss)
}

// BenchmarkReportNothingNew: the next report, with the cache and nothing
// new in the spool.
func BenchmarkReportNothingNew(b *testing.B) {
	e := benchSpool(b)
	runChild(b, e) // warm the cache
	var r childResult
	var rss float64
	for b.Loop() {
		r, rss = runChild(b, e)
	}
	e.check(b, r)
	if r.Stats.ReportsRead != 0 {
		b.Errorf("read %d reports with nothing new", r.Stats.ReportsRead)
	}
	reportMetrics(b, r, rss)
}

// BenchmarkReportNew1Percent: before each report, one node in a hundred
// sends a new report; only those are read.
func BenchmarkReportNew1Percent(b *testing.B) {
	e := benchSpool(b)
	runChild(b, e)
	rcpt := recipientOf(b, e)
	var r childResult
	var rss float64
	for b.Loop() {
		b.StopTimer()
		e.extraSeq++
		newest := uint64(e.generations)
		err := workpool.Run(context.Background(), e.nodes/100, runtime.GOMAXPROCS(0), func(k int) error {
			return e.writeReport(filepath.Join(e.dir, "spool"), rcpt, k*100, newest, 1+e.extraSeq)
		})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		r, rss = runChild(b, e)
		if r.Stats.ReportsRead != e.nodes/100 {
			b.Errorf("read %d reports, want the %d new ones (%+v)", r.Stats.ReportsRead, e.nodes/100, r.Stats)
		}
	}
	reportMetrics(b, r, rss)
}

func recipientOf(b *testing.B, e *benchEnv) age.Recipient {
	m, err := mesh.Open(context.Background(), filepath.Join(e.dir, "mesh"), "")
	if err != nil {
		b.Fatal(err)
	}
	return m.Pair.Age.Recipient()
}
