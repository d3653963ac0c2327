package declare

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/brief"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/internal/testutil/simfleet"
	"github.com/muster-tool/muster/spool"
)

// The fleet the benchmark declares: every node gets 100 resources, 50 from
// a role every node has and 50 from one of ten group roles chosen by label.
// With perNode, every node also has a node section of its own (a host name
// file), so no two nodes share a resource list: the worst case for
// sharing encoded resources.
const (
	benchGroups        = 10
	benchBasePerRole   = 50
	benchGroupPerRole  = 50
	benchContentLength = 200
)

// benchSource writes the declaration; salt changes one file's content, so
// each declare has something new to commit. With templates, the base
// role's first two files are rendered for each node from its name, a
// label, a var and two facts, into content as long as the others'.
func benchSource(nodes int, perNode, templates bool, salt int) string {
	var b strings.Builder
	content := strings.Repeat("x", benchContentLength)
	b.WriteString("[vars]\nport = 8080\n\n")
	resources := func(role string, n int) {
		for i := range n {
			switch {
			case i < 2 && role == "base" && templates:
				fmt.Fprintf(&b, "[role.%s.file.\"/etc/%s/conf-%03d\"]\ntemplate_content = \"{{ .Node }} {{ .Labels.group }} {{ .Vars.port }} {{ .Facts.hostname }} {{ .Facts.cpus }} %s %d\\n\"\nmode = \"0644\"\nowner = \"root\"\n\n", role, role, i, content[:benchContentLength-60], i)
				continue
			}
			switch i % 5 {
			case 0, 1:
				fmt.Fprintf(&b, "[role.%s.file.\"/etc/%s/conf-%03d\"]\ncontent = \"%s %d\\n\"\nmode = \"0644\"\nowner = \"root\"\n\n", role, role, i, content, i)
			case 2:
				fmt.Fprintf(&b, "[role.%s.directory.\"/srv/%s/dir-%03d\"]\nmode = \"0755\"\n\n", role, role, i)
			case 3:
				fmt.Fprintf(&b, "[role.%s.package.%s-pkg-%03d]\nversion = \"1.%d-1\"\n\n", role, role, i, i)
			case 4:
				fmt.Fprintf(&b, "[role.%s.service.\"%s-svc-%03d.service\"]\nenabled = true\nrunning = true\nrestart_on = [\"/etc/%s/conf-%03d\"]\n\n", role, role, i, role, i-4)
			}
		}
	}
	fmt.Fprintf(&b, "[role.base]\nnodes = [\"*\"]\n\n[role.base.file.\"/etc/salt\"]\ncontent = \"%d\\n\"\n\n", salt)
	resources("base", benchBasePerRole-1)
	for g := range benchGroups {
		role := fmt.Sprintf("g%d", g)
		fmt.Fprintf(&b, "[role.%s]\nlabels = { group = \"%s\" }\n\n", role, role)
		resources(role, benchGroupPerRole)
	}
	if perNode {
		for i := range nodes {
			fmt.Fprintf(&b, "[node.%s.file.\"/etc/hostname\"]\ncontent = \"%s\\n\"\n\n", benchNodeName(i), benchNodeName(i))
		}
	}
	return b.String()
}

func benchNodeName(i int) string { return fmt.Sprintf("node-%05d", i) }

// benchFleet enrols nodes directly in the registry, each with its own key
// pair (declare encrypts to each node's key) and a passing briefing with
// facts.
func benchFleet(b testing.TB, f *fixture, nodes int) {
	b.Helper()
	for i := range nodes {
		pair, err := keys.Generate()
		if err != nil {
			b.Fatal(err)
		}
		name := benchNodeName(i)
		id := &enrol.Identity{NodeID: pair.Public().Fingerprint(), Name: name, Host: pair.Public(),
			Labels: map[string]string{"group": fmt.Sprintf("g%d", i%benchGroups)}, AdmittedAt: t0}
		f.add(id)
		br := passed(name)
		br.Muster = "1.5.0"
		br.Facts = &brief.Facts{Hostname: name + ".example.org", OSID: "debian", OSVersion: "12", OSCodename: "bookworm",
			Arch: "amd64", CPUs: 4, MemoryMB: 7962, Addresses: []string{"192.0.2.10", "2001:db8::10"}}
		f.briefs[id.NodeID] = br
	}
}

func benchParse(b testing.TB, src string) *declaration.Declaration {
	d, problems := declaration.Parse([]declaration.Source{{Name: "site.toml", Data: []byte(src), Dir: "."}})
	if declaration.HasErrors(problems) {
		b.Fatalf("benchmark declaration: %v", problems)
	}
	return d
}

// BenchmarkDeclare measures what `muster declare` does once the registry
// is loaded: parse the declaration, resolve it for every node, seal and
// write one bundle per node (with a recovery copy of a hundred entries),
// the manifest and the commit, on a directory spool that already holds a
// generation (the steady state, so reading the previous manifest and the
// diff are included). lists=per-node gives every node a resource of its
// own; spool=discard drops the nodes' bundles instead of writing them, to
// separate computing from writing; spool=s3 writes them to versitygw on
// loopback, whose CPU time is reported beside muster's (store-cpu-s/op).
// peak-RSS-MiB is the whole process's high-water mark, fixture included:
// run one case at a time to read it.
func BenchmarkDeclare(b *testing.B) {
	for _, nodes := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for _, perNode := range []bool{false, true} {
				b.Run(map[bool]string{false: "lists=shared", true: "lists=per-node"}[perNode], func(b *testing.B) {
					for _, sp := range []string{"dir", "discard", "s3"} {
						b.Run("spool="+sp, func(b *testing.B) {
							f := newFixture(b)
							switch sp {
							case "discard":
								f.m.Spool = discardDecls{f.m.Spool}
							case "s3":
								onS3(b, f)
							}
							benchDeclareOn(b, f, nodes, perNode, false)
						})
					}
				})
			}
		})
	}
}

// BenchmarkDeclareTemplates is BenchmarkDeclare's shared lists on a
// directory spool, with every node rendering two templates
// (templates=2), against the same declaration with those two files as
// plain content (templates=0): what rendering costs.
func BenchmarkDeclareTemplates(b *testing.B) {
	for _, nodes := range []int{1000, 10000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			for _, templates := range []bool{false, true} {
				b.Run(map[bool]string{false: "templates=0", true: "templates=2"}[templates], func(b *testing.B) {
					benchDeclare(b, nodes, false, templates)
				})
			}
		})
	}
}

// BenchmarkDeclareFleet is BenchmarkDeclare for 100,000 nodes on an S3
// spool (versitygw on loopback), every node's list shared with its group.
// The target is 60 seconds and 1 GiB on a 2-core machine.
//
//	MUSTER_BENCH_FLEET=1 go test -run '^$' -bench DeclareFleet -benchtime 1x -timeout 1h ./internal/declare
func BenchmarkDeclareFleet(b *testing.B) {
	simfleet.Enabled(b)
	f := newFixture(b)
	onS3(b, f)
	benchDeclareOn(b, f, 100_000, false, false)
}

func benchDeclare(b *testing.B, nodes int, perNode, templates bool) {
	benchDeclareOn(b, newFixture(b), nodes, perNode, templates)
}

// onS3 moves f's mesh to an S3 spool on a versitygw of its own, started
// for the benchmark, with the mesh's public keys copied over.
func onS3(b *testing.B, f *fixture) {
	srv := s3server.Start(b)
	srv.SetEnv(b)
	sp, err := spool.Open(srv.URL("mesh"))
	if err != nil {
		b.Fatal(err)
	}
	pub, err := f.m.Spool.Get(f.ctx, spool.MeshKeysName, 0)
	if err != nil {
		b.Fatal(err)
	}
	if err := sp.Put(f.ctx, spool.MeshKeysName, pub); err != nil {
		b.Fatal(err)
	}
	f.m.Spool = sp
	f.store = srv
}

func benchDeclareOn(b *testing.B, f *fixture, nodes int, perNode, templates bool) {
	benchFleet(b, f, nodes)
	o := Options{Recovery: benchRecovery(f)}
	f.mustDeclare(benchParse(b, benchSource(nodes, perNode, templates, 0)), o)
	// Two sources to alternate between, so that every declare commits a
	// new generation.
	srcs := [2]string{benchSource(nodes, perNode, templates, 1), benchSource(nodes, perNode, templates, 2)}
	b.ReportAllocs()
	cpu0 := cpuTime()
	var store0 time.Duration
	if f.store != nil {
		store0 = f.store.CPUTime()
	}
	i := 0
	for b.Loop() {
		i++
		res, err := f.declare(benchParse(b, srcs[i%2]), o)
		if err != nil {
			b.Fatal(err)
		}
		if len(res.Nodes) != nodes || res.Unchanged {
			b.Fatalf("declared %d nodes (unchanged %v), want %d", len(res.Nodes), res.Unchanged, nodes)
		}
	}
	// CPU time says what the work costs when other processes share the
	// machine and make wall time noisy.
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "s/declare")
	b.ReportMetric((cpuTime()-cpu0).Seconds()/float64(b.N), "cpu-s/op")
	if f.store != nil {
		b.ReportMetric((f.store.CPUTime()-store0).Seconds()/float64(b.N), "store-cpu-s/op")
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		b.ReportMetric(float64(ru.Maxrss)/1024, "peak-RSS-MiB")
	}
}

// cpuTime is the process's user and system time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchRecovery gives every node a recovery copy of a hundred entries,
// the same for the nodes of one group, as reports would after an apply.
func benchRecovery(f *fixture) func(string) (Recovery, bool) {
	ledgers := make([][]ledger.Entry, benchGroups)
	for g := range ledgers {
		for i := range 100 {
			p := fmt.Sprintf("/etc/g%d/conf-%03d", g, i)
			ledgers[g] = append(ledgers[g], ledger.Entry{ID: "file:" + p, Kind: resource.File, Path: p,
				Digest: declaration.Digest(p), Created: true})
		}
	}
	return func(name string) (Recovery, bool) {
		id := f.reg.Enrolled(name)
		if id == nil {
			return Recovery{}, false
		}
		var g int
		fmt.Sscanf(id.Labels["group"], "g%d", &g)
		return Recovery{NodeID: id.NodeID, Ledger: ledgers[g]}, true
	}
}

// discardDecls drops the nodes' bundles instead of writing them, to tell
// the cost of computing them from the cost of the spool's writes.
type discardDecls struct{ spool.Spool }

func (d discardDecls) Put(ctx context.Context, name string, data []byte) error {
	if strings.HasPrefix(name, spool.DeclPrefix) {
		return nil
	}
	return d.Spool.Put(ctx, name, data)
}
