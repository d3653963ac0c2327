package apply_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/muster-tool/muster/internal/apply"
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

// outage is the fixture's real spool, seen through a recorder of what a
// run asks for under repo/; with down set, the store stops answering there,
// as an object store does in a short outage (the test injects it at the
// moment it matters; the spool behind it is the real one).
type outage struct {
	spool.Spool
	mu    sync.Mutex
	asked []string
	down  bool
	// reportsDown: writing reports fails too.
	reportsDown bool
}

func (o *outage) Put(ctx context.Context, name string, data []byte) error {
	o.mu.Lock()
	down := o.reportsDown && strings.HasPrefix(name, spool.ReportPrefix)
	o.mu.Unlock()
	if down {
		return fmt.Errorf("spool %s: put %s: connection refused: %w", o.Spool, name, spool.ErrUnavailable)
	}
	return o.Spool.Put(ctx, name, data)
}

func (o *outage) note(name string) error {
	if !strings.HasPrefix(name, spool.RepoPrefix) {
		return nil
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.asked = append(o.asked, name)
	if o.down {
		return fmt.Errorf("spool %s: list %s: connection refused: %w", o.Spool, name, spool.ErrUnavailable)
	}
	return nil
}

func (o *outage) List(ctx context.Context, prefix string, fn func(spool.Info) error) error {
	if err := o.note(prefix); err != nil {
		return err
	}
	return o.Spool.List(ctx, prefix, fn)
}

func (o *outage) Get(ctx context.Context, name string, max int64) ([]byte, error) {
	if err := o.note(name); err != nil {
		return nil, err
	}
	return o.Spool.Get(ctx, name, max)
}

// The story: a short outage of the object store while apply reads the
// spool's package repository. It is a temporary failure of the run (status
// 4), before anything changed, never a failed line that would make the
// node look failed; and a run that declares no package does not consult
// the repository at all.
func TestRepositoryOnlyWhenPackagesAndOutageIsTemporary(t *testing.T) {
	f := newFixture(t)
	h := f.enrol("web-1")
	f.declare(motd("no packages"))
	sp := &outage{Spool: f.m.Spool, down: true}
	res, err := f.apply(h, func(o *apply.Options) { o.Spool = sp })
	if err != nil || res.Failed != 0 {
		t.Fatalf("apply without packages, the repository down: %+v, %v", res, err)
	}
	if len(sp.asked) != 0 {
		t.Errorf("a run declaring no package asked the spool for %q", sp.asked)
	}
	sent := len(f.reports(h))

	f.declare(motd("with a package") + "[role.all.package.muster-test-none]\nversion = \"1.0\"\n")
	_, err = f.apply(h, func(o *apply.Options) { o.Spool = sp })
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "package repository") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Fatalf("apply with the repository down: %v (class %v), want a temporary failure", err, fault.ClassOf(err))
	}
	if len(sp.asked) == 0 {
		t.Error("a run declaring a package did not consult the repository")
	}
	if got := readFile(t, filepath.Join(h.root, "etc/motd")); got != "no packages\n" {
		t.Errorf("the run changed motd to %q before failing", got)
	}
	if n := len(f.reports(h)); n != sent {
		t.Errorf("%d reports sent for the interrupted run; a spool outage is no failed line", n-sent)
	}
	if _, err := os.Stat(filepath.Join(h.state, "outbox")); err == nil {
		if ents, _ := os.ReadDir(filepath.Join(h.state, "outbox")); len(ents) != 0 {
			t.Errorf("outbox holds %d reports", len(ents))
		}
	}
}
