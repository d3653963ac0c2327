package spool_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
	"github.com/muster-tool/muster/spool/spooltest"
)

// s3Spool opens a fresh prefix of srv's bucket with fast retries, so fault
// tests do not wait seconds for backoff.
func s3Spool(t *testing.T, srv *s3server.Server, prefix string) *spool.S3 {
	t.Helper()
	cfg, err := spool.ParseS3Location(srv.URL(prefix))
	if err != nil {
		t.Fatal(err)
	}
	return s3Open(t, cfg)
}

func s3Open(t *testing.T, cfg spool.S3Config) *spool.S3 {
	t.Helper()
	cfg.AccessKey, cfg.SecretKey = s3server.AccessKey, s3server.SecretKey
	cfg.Attempts, cfg.Backoff, cfg.MaxBackoff, cfg.Timeout = 3, 10*time.Millisecond, 40*time.Millisecond, 5*time.Second
	s, err := spool.OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3Conformance runs the conformance suite against a real store, each
// subtest in a bucket of its own without a prefix, so that the longest
// names fit in S3's 1024-byte keys.
func TestS3Conformance(t *testing.T) {
	srv := s3server.Start(t)
	spooltest.Run(t, func(t *testing.T) spool.Spool {
		cfg, err := spool.ParseS3Location(srv.BucketURL(srv.NewBucket(), ""))
		if err != nil {
			t.Fatal(err)
		}
		return s3Open(t, cfg)
	})
}

// TestS3PrefixLimitsNames checks that a name too long for S3's keys once
// the spool's prefix is added is refused as a bad name, before the store
// is asked.
func TestS3PrefixLimitsNames(t *testing.T) {
	srv := s3server.Start(t)
	sp := s3Spool(t, srv, "site-a")
	long := strings.Repeat(strings.Repeat("s", 127)+"/", 7) + strings.Repeat("s", 124) // 1020 bytes
	err := sp.Put(t.Context(), long, []byte("x"))
	if !errors.Is(err, spool.ErrBadName) || !strings.Contains(err.Error(), "site-a") {
		t.Errorf("Put of a %d-byte name under prefix site-a: %v, want ErrBadName naming the prefix", len(long), err)
	}
	if err := sp.Put(t.Context(), long[:1024-len("site-a/")], []byte("x")); err != nil {
		t.Errorf("Put of a name that just fits: %v", err)
	}
}

// TestS3Open checks that spool.Open understands s3:// locations and takes
// its credentials from the usual AWS environment variables.
func TestS3Open(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	sp, err := spool.Open(srv.URL("open/env"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(t.Context(), "mesh/keys", []byte("k")); err != nil {
		t.Fatalf("Put through an s3:// location with env credentials: %v", err)
	}
	if want := "s3://" + s3server.Bucket + "/open/env at " + srv.Endpoint(); sp.String() != want {
		t.Errorf("String() = %q, want %q", sp.String(), want)
	}
}

// TestS3SharedCredentialsFile checks the second source of credentials: the
// shared credentials file and AWS_PROFILE.
func TestS3SharedCredentialsFile(t *testing.T) {
	srv := s3server.Start(t)
	file := filepath.Join(t.TempDir(), "credentials")
	ini := fmt.Sprintf("[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n\n[muster]\naws_access_key_id = %s\naws_secret_access_key = %s\n", s3server.AccessKey, s3server.SecretKey)
	if err := os.WriteFile(file, []byte(ini), 0o600); err != nil {
		t.Fatal(err)
	}
	s3server.HideAWS(t)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	t.Setenv("AWS_PROFILE", "muster")
	sp, err := spool.Open(srv.URL("open/file"))
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Put(t.Context(), "a", []byte("x")); err != nil {
		t.Fatalf("Put with credentials from profile muster of the shared file: %v", err)
	}
	// The default profile's keys are wrong: the store refuses them, and
	// the refusal is temporary (fixed outside muster) with a hint.
	t.Setenv("AWS_PROFILE", "")
	sp, err = spool.Open(srv.URL("open/file"))
	if err != nil {
		t.Fatal(err)
	}
	err = sp.Put(t.Context(), "b", []byte("y"))
	if err == nil || fault.ClassOf(err) != fault.Temporary || !strings.Contains(fault.HintOf(err), "credentials") {
		t.Errorf("Put with wrong credentials: %v (class %v, hint %q), want a temporary error hinting at credentials", err, fault.ClassOf(err), fault.HintOf(err))
	}
	// A profile that is nowhere: the error names it.
	t.Setenv("AWS_PROFILE", "nobody")
	sp, err = spool.Open(srv.URL("open/file"))
	if err != nil {
		t.Fatal(err)
	}
	err = sp.Put(t.Context(), "c", []byte("z"))
	if fault.ClassOf(err) != fault.Temporary || !strings.Contains(err.Error(), "could not get credentials") || !strings.Contains(err.Error(), "nobody") {
		t.Errorf("Put with AWS_PROFILE naming no profile: %v, want a temporary error naming the profile", err)
	}
}

func TestParseS3Location(t *testing.T) {
	for _, tc := range []struct {
		loc  string
		want spool.S3Config
		bad  string // part of the error, if the location is refused
	}{
		{loc: "s3://bucket", want: spool.S3Config{Bucket: "bucket"}},
		{loc: "s3://bucket/", want: spool.S3Config{Bucket: "bucket"}},
		{loc: "s3://bucket/site/a/", want: spool.S3Config{Bucket: "bucket", Prefix: "site/a"}},
		{loc: "s3://b.x-1/p?endpoint=127.0.0.1:9000&region=eu-west-1&tls=false",
			want: spool.S3Config{Bucket: "b.x-1", Prefix: "p", Endpoint: "127.0.0.1:9000", Region: "eu-west-1", Insecure: true}},
		{loc: "s3://bucket/p?tls=true", want: spool.S3Config{Bucket: "bucket", Prefix: "p"}},
		{loc: "s3:///p", bad: "no bucket"},
		{loc: "s3://Bucket/p", bad: "not allowed"},
		{loc: "s3://ab/p", bad: "3 to 63"},
		{loc: "s3://bucket/a//b", bad: "empty"},
		{loc: "s3://bucket/a/../b", bad: `".."`},
		{loc: "s3://bucket/p?tls=maybe", bad: "tls"},
		{loc: "s3://bucket/p?endpoint=", bad: "endpoint"},
		{loc: "s3://bucket/p?endpoint=http://x", bad: "endpoint"},
		{loc: "s3://bucket/p?endpiont=x", bad: `unknown parameter "endpiont"`},
		{loc: "s3://key:secret@bucket/p", bad: "credentials"},
	} {
		got, err := spool.ParseS3Location(tc.loc)
		if tc.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tc.bad) || fault.ClassOf(err) != fault.Usage {
				t.Errorf("ParseS3Location(%q) = %+v, %v; want a usage error about %q", tc.loc, got, err, tc.bad)
			}
			if err != nil && strings.Contains(err.Error(), "secret") {
				t.Errorf("ParseS3Location(%q): error %q repeats the secret", tc.loc, err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseS3Location(%q) = %+v, %v; want %+v", tc.loc, got, err, tc.want)
		}
	}
}

// TestS3ListPaginates lists more keys than one LIST request returns, with
// a small page size so that many pages are fetched, and checks that
// nothing is lost or repeated at page boundaries.
func TestS3ListPaginates(t *testing.T) {
	srv := s3server.Start(t)
	sp := s3Spool(t, srv, "paged")
	const count = 1203
	var want []string
	// Uploading 1203 objects takes long; the store serves the files its
	// posix backend finds, so lay them out there directly, and upload a
	// few through the spool for good measure.
	for i := range count {
		name := fmt.Sprintf("report/n%d/%s-%s", i%7, spool.GenerationName(uint64(i)), spool.SeqName(1))
		want = append(want, name)
		if i%100 == 0 {
			if err := sp.Put(t.Context(), name, []byte(name)); err != nil {
				t.Fatal(err)
			}
			continue
		}
		p := filepath.Join(srv.Dir(), s3server.Bucket, "paged", filepath.FromSlash(name))
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(name), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	for _, pageSize := range []int{0, 97} { // 0: the store's default of 1000
		var got []string
		err := withPageSize(t, sp, pageSize).List(t.Context(), "report/", func(i spool.Info) error {
			got = append(got, i.Name)
			if i.Size != int64(len(i.Name)) {
				t.Errorf("List: %s has size %d, want %d", i.Name, i.Size, len(i.Name))
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Errorf("page size %d: List returned %d names, want the %d put, in order", pageSize, len(got), len(want))
		}
	}
}

// TestS3GetBounded checks that Get refuses an object over the limit from
// its Content-Length, and also when the store sends more bytes than it
// announced.
func TestS3GetBounded(t *testing.T) {
	srv := s3server.Start(t)
	sp := s3Spool(t, srv, "bounded")
	data := bytes.Repeat([]byte("x"), 5000)
	if err := sp.Put(t.Context(), "big", data); err != nil {
		t.Fatal(err)
	}
	if _, err := sp.Get(t.Context(), "big", 4999); !errors.Is(err, spool.ErrTooLarge) {
		t.Errorf("Get over the limit: %v, want ErrTooLarge", err)
	}
	// A store (or proxy) that announces no length and sends an endless
	// body: Get must stop at max+1 bytes and refuse.
	lying := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.WriteHeader(200)
		for range 1000 {
			if _, err := w.Write(bytes.Repeat([]byte("y"), 1<<10)); err != nil {
				return
			}
		}
	}))
	defer lying.Close()
	ls := openAt(t, strings.TrimPrefix(lying.URL, "http://"), "lie")
	got, err := ls.Get(t.Context(), "obj", 4096)
	if !errors.Is(err, spool.ErrTooLarge) {
		t.Errorf("Get from a store sending an endless body: %d bytes, %v; want ErrTooLarge", len(got), err)
	}
}

func openAt(t *testing.T, endpoint, prefix string) *spool.S3 {
	t.Helper()
	s, err := spool.OpenS3(spool.S3Config{
		Bucket: "bucket", Prefix: prefix, Endpoint: endpoint, Region: "us-east-1", Insecure: true,
		AccessKey: "k", SecretKey: "s",
		Attempts: 3, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Timeout: 2 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestS3Retries checks the retry policy against a store that fails on
// purpose: throttling and 5xx answers are retried and then succeed; a store
// that keeps failing makes the error temporary and wrap ErrUnavailable,
// naming the store, the operation, the object and the attempts.
func TestS3Retries(t *testing.T) {
	var calls atomic.Int64
	failFirst := atomic.Int64{}
	status := atomic.Int64{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		if n <= failFirst.Load() {
			code, st := "SlowDown", int(status.Load())
			if st != 503 {
				code = "InternalError"
			}
			w.Header().Set("Content-Type", "application/xml")
			w.WriteHeader(st)
			fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>Please reduce your request rate.</Message></Error>`, code)
			return
		}
		w.Header().Set("Content-Length", "2")
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", `"0123456789abcdef0123456789abcdef"`)
		w.WriteHeader(200)
		if r.Method == http.MethodGet {
			w.Write([]byte("ok"))
		}
	}))
	defer srv.Close()
	endpoint := strings.TrimPrefix(srv.URL, "http://")
	sp := openAt(t, endpoint, "retry")
	for _, st := range []int64{503, 500} {
		calls.Store(0)
		failFirst.Store(2)
		status.Store(st)
		got, err := sp.Get(t.Context(), "obj", 0)
		if err != nil || string(got) != "ok" {
			t.Errorf("HTTP %d twice, then ok: Get = %q, %v; want the object after retries", st, got, err)
		}
		if calls.Load() != 3 {
			t.Errorf("HTTP %d twice, then ok: %d requests, want 3", st, calls.Load())
		}
	}
	calls.Store(0)
	failFirst.Store(1 << 30)
	status.Store(503)
	_, err := sp.Get(t.Context(), "obj", 0)
	if !errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Temporary {
		t.Fatalf("store always throttling: %v (class %v), want temporary ErrUnavailable", err, fault.ClassOf(err))
	}
	for _, want := range []string{"s3://bucket/retry at " + endpoint, "get obj", "SlowDown", "3 attempts"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if calls.Load() != 3 {
		t.Errorf("store always throttling: %d requests, want 3 (the attempts)", calls.Load())
	}
}

// TestS3Timeout: a store that accepts connections and never answers is
// given up on within the spool location's timeout=, the budget of one
// request with all its attempts, and the error says the store did not
// answer, naming it.
func TestS3Timeout(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // hold it open, say nothing
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	}()
	const budget = time.Second
	cfg, err := spool.ParseS3Location("s3://bucket/p?region=us-east-1&tls=false&timeout=1s&endpoint=" + l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Timeout != budget {
		t.Fatalf("timeout=1s gave Timeout %v", cfg.Timeout)
	}
	cfg.AccessKey, cfg.SecretKey = "k", "s"
	sp, err := spool.OpenS3(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for op, f := range map[string]func() error{
		"put a": func() error { return sp.Put(t.Context(), "a", []byte("x")) },
		"list /": func() error {
			return sp.List(t.Context(), "", func(spool.Info) error { return nil })
		},
	} {
		start := time.Now()
		err := f()
		took := time.Since(start)
		if !errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Temporary {
			t.Fatalf("%s on a silent store: %v, want temporary ErrUnavailable", op, err)
		}
		want := "spool s3://bucket/p at " + l.Addr().String() + ": " + op + ": the store did not answer within 1s ("
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
		if !strings.Contains(fault.HintOf(err), l.Addr().String()) || !strings.Contains(fault.HintOf(err), "timeout=") {
			t.Errorf("hint %q should name the store and timeout=", fault.HintOf(err))
		}
		// The bound under test, with room for a busy machine: without
		// it each request waited 5 attempts of 2 minutes.
		if took > budget+time.Second {
			t.Errorf("%s: giving up took %v, want about the budget of %v", op, took, budget)
		}
	}
}

// TestS3StoreDown checks a store that is not running at all.
func TestS3StoreDown(t *testing.T) {
	srv := s3server.Start(t)
	sp := s3Spool(t, srv, "down")
	if err := sp.Put(t.Context(), "a", []byte("x")); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	for op, f := range map[string]func() error{
		"put":  func() error { return sp.Put(t.Context(), "b", []byte("y")) },
		"get":  func() error { _, err := sp.Get(t.Context(), "a", 0); return err },
		"list": func() error { return sp.List(t.Context(), "", func(spool.Info) error { return nil }) },
	} {
		err := f()
		if !errors.Is(err, spool.ErrUnavailable) || fault.ClassOf(err) != fault.Temporary {
			t.Errorf("%s with the store down: %v, want temporary ErrUnavailable", op, err)
			continue
		}
		if !strings.Contains(err.Error(), op) || !strings.Contains(err.Error(), srv.Endpoint()) || fault.HintOf(err) == "" {
			t.Errorf("%s with the store down: %q should name the operation and the endpoint, with a hint", op, err)
		}
	}
	srv.Restart()
	if got, err := sp.Get(t.Context(), "a", 0); err != nil || string(got) != "x" {
		t.Errorf("after restart Get = %q, %v", got, err)
	}
}

// TestS3ConditionalPut checks write-once against the store itself: an
// object written behind the spool's back (no HEAD can have seen it) still
// wins over a Put of other bytes, because the PUT is conditional.
func TestS3ConditionalPut(t *testing.T) {
	srv := s3server.Start(t)
	sp := s3Spool(t, srv, "cond")
	other := s3Spool(t, srv, "cond")
	if err := other.Put(t.Context(), "commit/00000000000000000001", []byte("run-a")); err != nil {
		t.Fatal(err)
	}
	// Race many writers of different bytes; exactly one wins.
	var wins atomic.Int64
	var wg sync.WaitGroup
	for i := range 12 {
		wg.Go(func() {
			err := sp.Put(context.Background(), "commit/00000000000000000002", fmt.Appendf(nil, "run-%d", i))
			switch {
			case err == nil:
				wins.Add(1)
			case !errors.Is(err, spool.ErrConflict):
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if wins.Load() != 1 {
		t.Errorf("%d writers of different bytes won, want 1", wins.Load())
	}
	err := sp.Put(t.Context(), "commit/00000000000000000001", []byte("run-b"))
	if !errors.Is(err, spool.ErrConflict) || !strings.Contains(err.Error(), "commit/00000000000000000001") {
		t.Errorf("Put over another writer's object: %v, want ErrConflict naming it", err)
	}
}

// Batches put at once on one S3 spool share its bound on PUTs in flight,
// and every PUT goes over a connection kept open from an earlier one: a
// declare of 100,000 nodes puts four batches at a time, and a connection
// opened and closed per PUT costs the mesh and the store more than the
// PUT itself.
func TestS3BatchesShareConnections(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	sp, err := spool.Open(px.URL("batches"))
	if err != nil {
		t.Fatal(err)
	}
	const batches, size = 4, 100
	var wg sync.WaitGroup
	for b := range batches {
		objs := make([]spool.Object, size)
		for i := range objs {
			objs[i] = spool.Object{Name: fmt.Sprintf("decl/00000000000000000001/run%d/node%03d", b, i), Data: fmt.Appendf(nil, "bundle %d %d", b, i)}
		}
		wg.Go(func() {
			if err := spool.PutManyNew(t.Context(), sp, objs); err != nil {
				t.Errorf("batch %d: %v", b, err)
			}
		})
	}
	wg.Wait()
	if n := px.Count()[s3server.KindPut]; n != batches*size {
		t.Errorf("%d PUTs, want %d", n, batches*size)
	}
	// A PUT that finds no idle connection dials one, and takes an idle
	// one instead if it frees first: a few more connections than PUTs in
	// flight is HTTP/1.1's way, one per PUT is not.
	if n := px.Conns(); n > 2*spool.S3BatchPuts {
		t.Errorf("%d connections opened for %d PUTs, want at most %d (twice the PUTs in flight)", n, batches*size, 2*spool.S3BatchPuts)
	}
}

// DeleteMany on S3 removes a thousand objects a request: spool gc's daily
// removal of a fleet's replaced reports is a few requests, not a HEAD and
// a DELETE for each of millions of objects.
func TestS3DeleteManyBatches(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	sp, err := spool.Open(px.URL("gc"))
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]spool.Object, 2500)
	names := make([]string, len(objs))
	for i := range objs {
		names[i] = fmt.Sprintf("report/n%d/r%04d", i%10, i)
		objs[i] = spool.Object{Name: names[i], Data: []byte(names[i])}
	}
	if err := spool.PutManyNew(t.Context(), sp, objs); err != nil {
		t.Fatal(err)
	}
	px.Reset()
	gone, err := spool.DeleteMany(t.Context(), sp, names)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := px.Count(), map[string]int{s3server.KindDeleteMany: 3}; !maps.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	for i, g := range gone {
		if !g {
			t.Errorf("%s not said gone", names[i])
		}
	}
	if err := sp.List(t.Context(), "report/", func(i spool.Info) error {
		t.Errorf("%s is still there", i.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

// Subdirs on S3 is one listing with a delimiter however many objects the
// directories hold: spool gc finds a generation's declare runs without
// listing a bundle per node.
func TestS3SubdirsOneRequest(t *testing.T) {
	srv := s3server.Start(t)
	srv.SetEnv(t)
	px := srv.Proxy(t)
	sp, err := spool.Open(px.URL("dirs"))
	if err != nil {
		t.Fatal(err)
	}
	objs := make([]spool.Object, 2500)
	for i := range objs {
		objs[i] = spool.Object{Name: spool.DeclName(1, fmt.Sprintf("run%d", i%3), fmt.Sprintf("%032x", i)), Data: []byte("bundle")}
	}
	if err := spool.PutManyNew(t.Context(), sp, objs); err != nil {
		t.Fatal(err)
	}
	px.Reset()
	prefix := spool.DeclPrefix + spool.GenerationName(1) + "/"
	got, err := spool.Subdirs(t.Context(), sp, prefix)
	if want := []string{prefix + "run0/", prefix + "run1/", prefix + "run2/"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Subdirs = %q, %v; want %q", got, err, want)
	}
	if n := px.Count(); !maps.Equal(n, map[string]int{s3server.KindList: 1}) {
		t.Errorf("requests %v, want one LIST", n)
	}
}
