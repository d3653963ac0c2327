package spool_test

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"testing"

	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// A sync between S3 and a directory that finds nothing new costs the
// listings alone, one request per 1,000 keys a side: the objects compared
// by content (commits, manifests, enrolment records) are shown equal by
// their ETags, the MD5 of the directory's bytes. A commit that differs is
// still a conflict.
func TestSyncNothingNewS3CostsListings(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	cfg, err := spool.ParseS3Location(px.URL("sync"))
	if err != nil {
		t.Fatal(err)
	}
	s3 := s3Open(t, cfg)
	var objs []spool.Object
	for g := range 30 {
		objs = append(objs, spool.Object{Name: spool.CommitName(uint64(g + 1)), Data: fmt.Appendf(nil, "commit %d", g)},
			spool.Object{Name: spool.ManifestName(uint64(g+1), "run"), Data: fmt.Appendf(nil, "manifest %d", g)})
	}
	for i := range 600 {
		objs = append(objs, spool.Object{Name: spool.TokenName(fmt.Sprintf("%032x", i)), Data: fmt.Appendf(nil, "token %d", i)})
	}
	for i := range 1800 {
		objs = append(objs, spool.Object{Name: spool.ReportName(fmt.Sprintf("%032x", i%100), uint64(i/100+1), 1), Data: fmt.Appendf(nil, "report %d", i)})
	}
	if err := spool.PutMany(t.Context(), s3, objs); err != nil {
		t.Fatal(err)
	}
	dir, err := spool.OpenDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if res, err := spool.Sync(t.Context(), s3, dir, spool.SyncOptions{}); err != nil || res.Copied != len(objs) {
		t.Fatalf("first sync: %+v, %v", res, err)
	}
	pages := (len(objs) + 999) / 1000
	for _, tc := range []struct {
		name     string
		src, dst spool.Spool
	}{{"s3 to dir", s3, dir}, {"dir to s3", dir, s3}} {
		px.Reset()
		res, err := spool.Sync(t.Context(), tc.src, tc.dst, spool.SyncOptions{})
		if err != nil || res.Copied != 0 || res.Skipped != len(objs) {
			t.Errorf("%s: %+v, %v", tc.name, res, err)
		}
		if got, want := px.Count(), map[string]int{s3server.KindList: pages}; !maps.Equal(got, want) {
			t.Errorf("%s: requests %v, want %v", tc.name, got, want)
		}
	}

	// Another commit of generation 1, of the same size, in the directory.
	file := filepath.Join(dir.Path(), filepath.FromSlash(spool.CommitName(1)))
	if err := os.Chmod(file, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("commit X"), 0o444); err != nil {
		t.Fatal(err)
	}
	res, err := spool.Sync(t.Context(), s3, dir, spool.SyncOptions{})
	if len(res.Conflicts) != 1 || res.Conflicts[0].Name != spool.CommitName(1) || err == nil {
		t.Errorf("another commit of generation 1: conflicts %+v, %v", res.Conflicts, err)
	}
}
