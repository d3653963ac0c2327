package spool_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/muster-tool/muster/spool"
)

// hidden is a spool Sync does not know to be a directory, so it matches
// the two sides by their listings.
type hidden struct{ spool.Spool }

// put writes an object straight as a file, as a copy by cp or a damaged
// stick leaves it, without the checks of Put.
func put(t testing.TB, d *spool.Dir, name string, data []byte) {
	t.Helper()
	p := filepath.Join(d.Path(), filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestSyncDirsAsListed: two directory spools are walked in step, not
// listed; what sync finds to do must be what it finds from the listings,
// for every way two copies can differ, in directories large enough to be
// walked by several goroutines.
func TestSyncDirsAsListed(t *testing.T) {
	src, dst := newDir(t), newDir(t)
	both := func(name string, a, b []byte) {
		put(t, src, name, a)
		put(t, dst, name, b)
	}
	for i := range 300 {
		node := fmt.Sprintf("%032x", i)
		tok := fmt.Sprintf("%032x", 1000+i)
		body := fmt.Appendf(nil, "object %d", i)
		switch i % 6 {
		case 0: // the same on both sides
			both(spool.ReportName(node, 1, 1), body, body)
			both(spool.AdmitName(tok), body, body)
			both(spool.JoinName(tok, node), body, body)
		case 1: // another size
			both(spool.ReportName(node, 1, 1), body, append(body, 'x'))
			both(spool.TokenName(tok), body, body[1:])
		case 2: // the same size, other bytes
			both(spool.ReportName(node, 1, 1), body, append(body[1:], '!'))
			both(spool.AdmitName(tok), body, append(body[1:], '!'))
			both(spool.JoinName(tok, node), body, append(body[1:], '!'))
		case 3: // only in the source, in a directory of both or a new one
			both(spool.ReportName(node, 1, 1), body, body)
			put(t, src, spool.ReportName(node, 1, 2), body)
			put(t, src, spool.BriefName(node, 1), body)
			put(t, src, spool.AdmitName(tok), body)
		case 4: // only in the destination
			put(t, dst, spool.ReportName(node, 1, 1), body)
			put(t, dst, spool.TokenName(tok), body)
		case 5: // an object in one, a directory of objects in the other
			put(t, src, spool.BriefName(node, 1), body)
			put(t, dst, spool.BriefName(node, 1)+"/x", body)
			put(t, dst, spool.TokenName(tok), body)
			put(t, src, spool.TokenName(tok)+"/x", body)
		}
	}
	both(spool.CommitName(1), []byte("one"), []byte("two"))
	put(t, src, spool.CommitName(2), []byte("two"))
	// Never objects: temp files, symlinks.
	put(t, src, ".muster-tmp-0123456789abcdef", []byte("half"))
	if err := os.Symlink("0", filepath.Join(src.Path(), "commit", "00000000000000000009")); err != nil {
		t.Fatal(err)
	}

	for _, check := range []bool{false, true} {
		opts := spool.SyncOptions{DryRun: true, Check: check}
		want, wantErr := spool.Sync(t.Context(), hidden{src}, hidden{dst}, opts)
		got, err := spool.Sync(t.Context(), src, dst, opts)
		if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
			t.Errorf("Check %v: walked in step: %+v, %v\nlisted: %+v, %v", check, got, err, want, wantErr)
		}
		if want.Copied == 0 || want.Skipped == 0 || len(want.Conflicts) == 0 {
			t.Errorf("Check %v: %+v: want copies, skips and conflicts", check, want)
		}
	}
}

// TestSyncFindsRecordRewrittenInPlace: an enrolment record rewritten in
// place with bytes of the same size, its modification time put back (as
// cp -p, rsync -a or a restore from a backup leave it), is still a
// conflict: records are compared by content, never by size and time.
func TestSyncFindsRecordRewrittenInPlace(t *testing.T) {
	s := newSigner(t)
	src, dst := newDir(t), newDir(t)
	name := spool.AdmitName("0123456789abcdef0123456789abcdef")
	objs := s.fill(t, src, name)
	copyTree(t, src.Path(), dst.Path())
	file := filepath.Join(dst.Path(), filepath.FromSlash(name))
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	if res, err := spool.Sync(t.Context(), src, dst, checked); err != nil || res.Skipped != 1 {
		t.Fatalf("Sync of equal copies = %+v, %v; want 1 skipped", res, err)
	}
	other := s.bundle(t, name, 100+len(name)*7) // as fill makes it
	if len(other) != len(objs[name]) {
		t.Fatalf("want a record of %d bytes, made %d", len(objs[name]), len(other))
	}
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, other, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(file, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	res, err := spool.Sync(t.Context(), src, dst, checked)
	if !errors.Is(err, spool.ErrConflict) || len(res.Conflicts) != 1 || res.Conflicts[0].Name != name {
		t.Errorf("Sync = %+v, %v; want %s a conflict", res, err, name)
	}
}

// TestSyncDirsInterrupted: a sync stopped while the two directories are
// walked copies nothing and says so.
func TestSyncDirsInterrupted(t *testing.T) {
	src, dst := newDir(t), newDir(t)
	for i := range 400 {
		put(t, src, spool.ReportName(fmt.Sprintf("%032x", i), 1, 1), []byte("report"))
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	res, err := spool.Sync(ctx, src, dst, spool.SyncOptions{})
	if !errors.Is(err, context.DeadlineExceeded) || res.Copied != 0 {
		t.Errorf("Sync = %+v, %v; want nothing copied and the deadline", res, err)
	}
	if got := contents(t, dst); len(got) != 0 {
		t.Errorf("an interrupted sync copied %d objects", len(got))
	}
}
