package apply_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/declaration"
	"github.com/muster-tool/muster/internal/declare"
	"github.com/muster-tool/muster/internal/enrol"
	"github.com/muster-tool/muster/internal/fleet"
	"github.com/muster-tool/muster/internal/host"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/internal/workpool"
	"github.com/muster-tool/muster/spool"
)

// BenchmarkFleetApplyS3 is the object-store load check: 1,000 hosts run
// apply against one real S3 spool (versitygw on loopback), 50 at a time.
// Every apply must succeed and every report must arrive: the benchmark
// fails on any error or lost report, and reports the wall time of the
// whole fleet's run.
//
//	go test -run '^$' -bench FleetApplyS3 -benchtime 1x ./internal/apply
func BenchmarkFleetApplyS3(b *testing.B) {
	const hosts, concurrency = 1000, 50
	srv := s3server.Start(b)
	srv.SetEnv(b)
	ctx := context.Background()
	dir := b.TempDir()
	loc := srv.URL("fleet")
	m, err := mesh.Init(ctx, filepath.Join(dir, "mesh"), loc, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	reg, err := enrol.LoadRegistry(ctx, m)
	if err != nil {
		b.Fatal(err)
	}
	type node struct{ config, state, root string }
	nodes := make([]node, hosts)
	now := time.Now()
	err = workpool.Run(ctx, hosts, 16, func(i int) error {
		name := fmt.Sprintf("host-%04d", i)
		n := node{
			config: filepath.Join(dir, "hosts", name, "muster.toml"),
			state:  filepath.Join(dir, "hosts", name, "state"),
			root:   filepath.Join(dir, "hosts", name, "root"),
		}
		minimalRoot(b, n.root)
		tok, err := enrol.Issue(ctx, m, reg, enrol.IssueOptions{Name: name, Expires: time.Hour, Now: now})
		if err != nil {
			return err
		}
		if _, err := enrol.Join(ctx, enrol.JoinOptions{Token: tok.String(), Spool: loc, Config: n.config, State: n.state, Root: n.root, Version: "bench", Now: now}); err != nil {
			return fmt.Errorf("%s joins: %w", name, err)
		}
		nodes[i] = n
		return nil
	})
	if err != nil {
		b.Fatal(err)
	}
	res, reg, err := enrol.Admit(ctx, m, time.Now())
	if err != nil || len(res.Admitted) != hosts {
		b.Fatalf("admit: %v, %d admitted", err, len(res.Admitted))
	}
	briefs, _, err := reg.Briefings(ctx, m)
	if err != nil {
		b.Fatal(err)
	}
	src := "[role.all]\nnodes = [\"host-*\"]\n[role.all.file.\"/etc/motd\"]\ncontent = \"fleet\\n\"\n[role.all.directory.\"/srv/app\"]\nmode = \"0755\"\n"
	decl, problems := declaration.Parse([]declaration.Source{{Name: "fleet.toml", Data: []byte(src), Dir: dir}})
	if declaration.HasErrors(problems) {
		b.Fatal(problems)
	}
	dres, err := declare.Declare(ctx, m, reg, briefs, decl, declare.Options{Now: time.Now()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		var failed atomic.Int32
		err := workpool.Run(ctx, hosts, concurrency, func(i int) error {
			cfg, err := host.LoadConfig(nodes[i].config)
			if err != nil {
				return err
			}
			id, err := host.LoadIdentity(cfg)
			if err != nil {
				return err
			}
			sp, err := spool.Open(cfg.Spool)
			if err != nil {
				return err
			}
			r, err := apply.Run(ctx, apply.Options{Config: cfg, Identity: id, Spool: sp, Root: nodes[i].root, Version: "bench", Now: time.Now})
			if err != nil {
				return fmt.Errorf("apply on %s: %w", cfg.Node, err)
			}
			if !r.Sent || r.Failed > 0 {
				failed.Add(1)
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
		if failed.Load() > 0 {
			b.Fatalf("%d applies failed a line or kept their report in the outbox", failed.Load())
		}
	}
	b.StopTimer()
	// No lost report: the mesh sees every host applied the generation.
	st, err := fleet.Load(ctx, m, reg, fleet.Options{})
	if err != nil {
		b.Fatal(err)
	}
	view, err := st.Generation(ctx, dres.Generation, fleet.Selection{})
	if err != nil {
		b.Fatal(err)
	}
	applied := 0
	for _, n := range view.Nodes {
		if n.Status == fleet.Applied {
			applied++
		}
	}
	if applied != hosts {
		b.Fatalf("%d of %d hosts applied generation %d as the mesh sees it", applied, hosts, dres.Generation)
	}
	b.ReportMetric(float64(hosts), "hosts")
}
