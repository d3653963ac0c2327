package upgrade

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What a report says about a new binary that fails its check is all the
// operator sees of a host that could not upgrade: each way of failing
// must be told apart, with the binary's own words.
func TestRunCheck(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		return p
	}
	cases := []struct {
		name, binary string
		what, said   string
	}{
		{"passes", write("ok", "#!/bin/sh\n[ \"$1 $2\" = 'apply --self-check' ] || exit 64\nexit 0\n", 0o755), "", ""},
		{"exits 1 at once", write("one", "#!/bin/sh\necho 'muster: error: spool s3://x: unknown backend' >&2\nexit 1\n", 0o755),
			"exit status 1", "muster: error: spool s3://x: unknown backend"},
		{"only stdout", write("out", "#!/bin/sh\necho 'no stderr here'\nexit 3\n", 0o755), "exit status 3", "no stderr here"},
		{"crashes", write("segv", "#!/bin/sh\necho 'fatal error' >&2\nkill -SEGV $$\n", 0o755), "killed by signal 11 (segmentation fault)", "fatal error"},
		{"hangs", write("hang", "#!/bin/sh\nexec sleep 30\n", 0o755), "did not finish within 300ms", ""},
		{"another architecture", write("elf", "\x7fELF\x02\x01\x01\x00garbage that is no program for this machine", 0o755), "does not execute here: exec format error", ""},
		{"not executable", write("plain", "#!/bin/sh\nexit 0\n", 0o644), "does not execute here: permission denied", ""},
		{"missing", filepath.Join(dir, "absent"), "does not execute here: no such file or directory", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			start := time.Now()
			err := RunCheck(context.Background(), c.binary, CheckArgs("/etc/muster/muster.toml", "/var/lib/muster", ""), 300*time.Millisecond)
			if c.what == "" {
				if err != nil {
					t.Fatalf("RunCheck: %v", err)
				}
				return
			}
			var ce *CheckError
			if !errors.As(err, &ce) {
				t.Fatalf("RunCheck = %v, want a *CheckError", err)
			}
			if ce.What != c.what || ce.Said != c.said {
				t.Errorf("RunCheck: what %q said %q; want %q and %q", ce.What, ce.Said, c.what, c.said)
			}
			if !strings.Contains(err.Error(), c.binary) {
				t.Errorf("message %q does not name the binary", err)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Errorf("RunCheck took %s: the timeout did not bound it", d)
			}
		})
	}
}

func TestCheckArgsAreStable(t *testing.T) {
	// Older and newer versions run each other with these: changing them
	// breaks upgrades between versions.
	got := strings.Join(CheckArgs("C", "S", "dir:/x"), " ")
	if want := "apply --self-check --config C --state S --spool dir:/x"; got != want {
		t.Errorf("CheckArgs = %q, want %q", got, want)
	}
}

// The known-good copy is what a host falls back to: it must be the
// installed binary that ran, updated only when the version changes.
func TestAfterReportBlessesOnlyTheInstalledBinary(t *testing.T) {
	root, state := t.TempDir(), t.TempDir()
	bin := filepath.Join(root, BinaryPath)
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho muster 1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	elsewhere := filepath.Join(t.TempDir(), "muster")
	if err := os.WriteFile(elsewhere, []byte("#!/bin/sh\necho a copy\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	defer func(old string) { selfExe = old }(selfExe)

	selfExe = elsewhere
	if blessed, err := AfterReport(state, root, "1.0"); err != nil || blessed {
		t.Fatalf("a binary run from elsewhere: AfterReport = %v, %v; want nothing blessed", blessed, err)
	}
	// The installed binary, by another name (as /proc/self/exe is).
	link := filepath.Join(t.TempDir(), "exe")
	if err := os.Link(bin, link); err != nil {
		t.Fatal(err)
	}
	selfExe = link
	if blessed, err := AfterReport(state, root, "1.0"); err != nil || !blessed {
		t.Fatalf("the installed binary: AfterReport = %v, %v; want blessed", blessed, err)
	}
	kg := filepath.Join(state, KnownGoodDir, "muster")
	if !fileEqual(t, kg, bin) {
		t.Error("known-good copy differs from the installed binary")
	}
	if fi, err := os.Stat(kg); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("known-good copy: %v, mode %v", err, fi.Mode())
	}
	if v, _ := KnownGoodVersion(state); v != "1.0" {
		t.Errorf("known-good version %q", v)
	}
	if blessed, err := AfterReport(state, root, "1.0"); err != nil || blessed {
		t.Errorf("same version again: AfterReport = %v, %v; want no copy", blessed, err)
	}
	// A new version's first report ends its probation.
	os.Remove(bin)
	if err := os.WriteFile(bin, []byte("#!/bin/sh\necho muster 2.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	os.Remove(link)
	if err := os.Link(bin, link); err != nil {
		t.Fatal(err)
	}
	if blessed, err := AfterReport(state, root, "2.0"); err != nil || !blessed {
		t.Fatalf("new version: AfterReport = %v, %v", blessed, err)
	}
	if !fileEqual(t, kg, bin) {
		t.Error("known-good copy is not the new version")
	}
}

func TestFailedList(t *testing.T) {
	var f Failed
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	f = f.With(Failure{Version: "2.0", At: at, Reason: FailedCheck, Detail: "exit status 1: boom"})
	f = f.With(Failure{Version: "2.0", At: at.Add(time.Hour), Reason: FailedStart, Detail: "3 failed starts in a row"})
	if len(f) != 1 || f[0].Reason != FailedStart {
		t.Fatalf("the same version twice: %+v", f)
	}
	x, ok := f.Find("2.0")
	if !ok {
		t.Fatal("2.0 not found")
	}
	want := "version 2.0 failed to start here on 2026-12-02 11:00 UTC (3 failed starts in a row); not retried until a newer version is declared"
	if got := x.held(); got != want {
		t.Errorf("held:\n%s\nwant\n%s", got, want)
	}
	for i := range 2 * maxFailed {
		f = f.With(Failure{Version: "3." + string(rune('a'+i%26)) + string(rune('a'+i/26))})
	}
	if len(f) != maxFailed {
		t.Errorf("list grew to %d entries", len(f))
	}
}
