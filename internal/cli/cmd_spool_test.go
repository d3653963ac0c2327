package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/bundle"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/keys"
	"github.com/muster-tool/muster/internal/mesh"
	"github.com/muster-tool/muster/internal/testutil/s3server"
	"github.com/muster-tool/muster/spool"
)

// runMuster runs muster in-process and returns its exit status and output.
func runMuster(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	t.Setenv("MUSTER_SPOOL", "")
	t.Setenv("MUSTER_MESH", "")
	var out, errb bytes.Buffer
	code = Main(context.Background(), args, Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	return code, out.String(), errb.String()
}

// spoolWith makes a directory spool holding a signed bundle under each
// name: the real thing for mesh/keys and commits (each following the one
// before), all signed by one mesh key.
func spoolWith(t *testing.T, names ...string) (dir string, objs map[string][]byte) {
	t.Helper()
	pair, err := keys.Generate()
	if err != nil {
		t.Fatal(err)
	}
	key := pair.Sign
	dir = t.TempDir()
	sp, err := spool.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	objs = map[string][]byte{}
	var prev *generation.Commit
	for _, n := range names {
		var b []byte
		var err error
		if gen, perr := spool.ParseCommitName(n); perr == nil {
			c := generation.Commit{Version: generation.CommitVersion, Generation: gen, Run: "0123456789abcdef", DeclaredAt: time.Now().UTC()}
			if prev != nil {
				c.Previous, c.PreviousGeneration = prev.Digest, prev.Generation
			}
			b, err = bundle.SignTOML(c, generation.CommitCtx(gen), key)
			c.Digest = generation.Digest(b)
			prev = &c
		} else if n == spool.MeshKeysName {
			b, err = bundle.SignTOML(mesh.Published{Keys: pair.Public(), Created: time.Now().UTC()}, bundle.Context{Kind: "mesh-keys", Name: n}, key)
		} else {
			b, err = bundle.Sign([]byte("payload "+n), bundle.Context{Kind: "test", Name: n}, key)
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := sp.Put(t.Context(), n, b); err != nil {
			t.Fatal(err)
		}
		objs[n] = b
	}
	return dir, objs
}

func TestSpoolSyncCommand(t *testing.T) {
	src, objs := spoolWith(t, "mesh/keys", spool.CommitName(1))
	dst := t.TempDir()
	code, out, errs := runMuster(t, "spool", "sync", src, dst)
	if code != ExitOK || errs != "" {
		t.Fatalf("spool sync: exit %d, stderr %q", code, errs)
	}
	if !strings.HasPrefix(out, "copied 2 objects (") || !strings.HasSuffix(out, "; 0 already there\n") {
		t.Errorf("summary %q", out)
	}
	for n, b := range objs {
		got, err := os.ReadFile(filepath.Join(dst, filepath.FromSlash(n)))
		if err != nil || !bytes.Equal(got, b) {
			t.Errorf("%s not copied whole: %v", n, err)
		}
	}
	code, out, _ = runMuster(t, "spool", "sync", "--json", src, dst)
	var js struct {
		Version   int `json:"version"`
		Copied    int `json:"copied"`
		Skipped   int `json:"skipped"`
		Bytes     int `json:"bytes"`
		Conflicts []struct {
			Name string `json:"name"`
		} `json:"conflicts"`
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || code != ExitOK {
		t.Fatalf("spool sync --json: exit %d, %v: %s", code, err, out)
	}
	if js.Version != 1 || js.Copied != 0 || js.Skipped != 2 || js.Conflicts == nil {
		t.Errorf("second sync --json = %+v, want version 1, nothing copied, 2 skipped, conflicts []", js)
	}
}

func TestSpoolSyncCommandConflictAndDamage(t *testing.T) {
	src, objs := spoolWith(t, spool.AdmitName("tok1"), spool.ReportName("n1", 1, 1))
	dst, _ := spoolWith(t, spool.AdmitName("tok1")) // another key: other bytes
	truncated := spool.ReportName("n1", 1, 1)
	file := filepath.Join(src, filepath.FromSlash(truncated))
	if err := os.Truncate(file, int64(len(objs[truncated])-3)); err != nil {
		t.Fatal(err)
	}
	// The two admissions have the same size: only --check tells them
	// apart.
	if code, _, _ := runMuster(t, "spool", "sync", src, dst); code != ExitFailure {
		t.Errorf("exit %d, want %d for the damaged object", code, ExitFailure)
	}
	code, _, errs := runMuster(t, "spool", "sync", "--check", src, dst)
	if code != ExitFailure {
		t.Errorf("exit %d, want %d", code, ExitFailure)
	}
	for _, want := range []string{
		"muster: error: conflict " + spool.AdmitName("tok1") + ": ",
		"muster: error: damaged " + truncated + ": bundle: truncated",
		"1 object differs between the two spools, and 1 damaged object was not copied",
		"muster: hint: nothing was overwritten",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr does not say %q:\n%s", want, errs)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, filepath.FromSlash(truncated))); err == nil {
		t.Error("the truncated object was copied")
	}
}

func TestSpoolSyncCommandUsage(t *testing.T) {
	dir := t.TempDir()
	for _, args := range [][]string{
		{"spool", "sync", dir},
		{"spool", "sync", dir, dir},
		{"spool", "sync", "--workers", "0", dir, t.TempDir()},
		{"spool", "sync", dir, "s3://bucket/p?tls=perhaps"},
	} {
		if code, _, errs := runMuster(t, args...); code != ExitUsage || !strings.HasPrefix(errs, "muster: error: ") {
			t.Errorf("muster %s: exit %d (%q), want %d", strings.Join(args, " "), code, errs, ExitUsage)
		}
	}
}

// TestSpoolSyncCommandStoreDown: an object store that is not there is a
// temporary failure, so a timer tries again.
func TestSpoolSyncCommandStoreDown(t *testing.T) {
	src, _ := spoolWith(t, "mesh/keys")
	s3server.HideAWS(t)
	t.Setenv("AWS_ACCESS_KEY_ID", "k")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "s")
	code, _, errs := runMuster(t, "spool", "sync", src, "s3://bucket/p?endpoint=127.0.0.1:1&tls=false&region=us-east-1")
	if code != ExitTemporary || !strings.Contains(errs, "muster: hint: check that the object store at 127.0.0.1:1") {
		t.Errorf("exit %d, stderr %q; want %d with a hint naming the store", code, errs, ExitTemporary)
	}
}

func TestSpoolVerifyCommand(t *testing.T) {
	dir, objs := spoolWith(t, "mesh/keys", spool.CommitName(1), spool.CommitName(2))
	code, out, errs := runMuster(t, "spool", "verify", "--spool", dir)
	if code != ExitOK || !strings.Contains(out, "3 objects") || !strings.Contains(out, "no problems") {
		t.Errorf("verify of a whole spool: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	bad := spool.CommitName(2)
	if err := os.Truncate(filepath.Join(dir, filepath.FromSlash(bad)), int64(len(objs[bad])/2)); err != nil {
		t.Fatal(err)
	}
	code, out, errs = runMuster(t, "spool", "verify", "--spool", dir)
	if code != ExitFailure || !strings.HasPrefix(out, "damaged "+bad+": bundle: truncated") || strings.Count(out, "\n") != 1 {
		t.Errorf("verify of a damaged spool: exit %d, stdout %q", code, out)
	}
	if !strings.Contains(errs, "1 problem in 3 objects") {
		t.Errorf("stderr %q does not sum up", errs)
	}
	code, out, _ = runMuster(t, "spool", "verify", "--json", "--spool", dir)
	var js struct {
		Version  int `json:"version"`
		Objects  int `json:"objects"`
		Problems []struct{ Object, Kind, Detail string }
	}
	if err := json.Unmarshal([]byte(out), &js); err != nil || code != ExitFailure {
		t.Fatalf("verify --json: exit %d, %v: %s", code, err, out)
	}
	if js.Version != 1 || js.Objects != 3 || len(js.Problems) != 1 || js.Problems[0].Object != bad || js.Problems[0].Kind != "damaged" {
		t.Errorf("verify --json = %+v", js)
	}
}

func TestSpoolGCCommand(t *testing.T) {
	dir, _ := spoolWith(t, "mesh/keys")
	tmp := filepath.Join(dir, ".muster-tmp-00000000000000aa")
	os.WriteFile(tmp, []byte("x"), 0o444)
	old := time.Now().Add(-3 * time.Hour)
	os.Chtimes(tmp, old, old)
	code, out, _ := runMuster(t, "spool", "gc", "--dry-run", "--spool", dir)
	if code != ExitOK || !strings.HasPrefix(out, "would remove .muster-tmp-00000000000000aa (temp-file: ") {
		t.Errorf("gc --dry-run: exit %d, stdout %q", code, out)
	}
	if _, err := os.Stat(tmp); err != nil {
		t.Error("gc --dry-run removed the temp file")
	}
	code, out, _ = runMuster(t, "spool", "gc", "--spool", dir)
	if code != ExitOK || !strings.HasPrefix(out, "removed .muster-tmp-00000000000000aa") {
		t.Errorf("gc: exit %d, stdout %q", code, out)
	}
	if _, err := os.Stat(tmp); err == nil {
		t.Error("gc left the old temp file")
	}
	code, out, _ = runMuster(t, "spool", "gc", "--spool", dir)
	if code != ExitOK || !strings.Contains(out, "nothing to remove") {
		t.Errorf("gc of a clean spool: exit %d, stdout %q", code, out)
	}
	if code, _, _ := runMuster(t, "spool", "gc", "--spool", dir, "--keep", "3"); code != ExitUsage {
		t.Errorf("gc --keep without --mesh: exit %d, want %d", code, ExitUsage)
	}
	if code, _, _ := runMuster(t, "spool", "gc", "--spool", dir, "--keep", "0"); code != ExitUsage {
		t.Errorf("gc --keep 0: exit %d, want %d", code, ExitUsage)
	}
}

func TestSpoolGCKeepNeedsItsMesh(t *testing.T) {
	spoolDir := t.TempDir()
	meshDir := filepath.Join(t.TempDir(), "mesh")
	if _, err := mesh.Init(t.Context(), meshDir, spoolDir, time.Now()); err != nil {
		t.Fatal(err)
	}
	code, out, errs := runMuster(t, "spool", "gc", "--mesh", meshDir, "--keep", "2")
	if code != ExitOK || !strings.Contains(out, "nothing to remove") {
		t.Errorf("gc --keep on a spool with no generation: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// Another mesh's spool is refused.
	other, _ := spoolWith(t)
	otherMesh := filepath.Join(t.TempDir(), "mesh")
	if _, err := mesh.Init(t.Context(), otherMesh, other, time.Now()); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := runMuster(t, "spool", "gc", "--mesh", meshDir, "--spool", other, "--keep", "2"); code != ExitRefused {
		t.Errorf("gc --keep on another mesh's spool: exit %d, want %d", code, ExitRefused)
	}
}
