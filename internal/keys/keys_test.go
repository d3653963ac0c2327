package keys

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestWriteLoadModesAndNoOverwrite(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	p, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := Write(dir, "mesh", p); err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]fs.FileMode{dir: 0o700, filepath.Join(dir, "mesh.age"): 0o600, filepath.Join(dir, "mesh.sign"): 0o600} {
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %o, want %o", path, st.Mode().Perm(), want)
		}
	}
	got, warnings, err := Load(dir, "mesh")
	if err != nil || len(warnings) != 0 {
		t.Fatalf("load: %v %v", err, warnings)
	}
	if got.Public() != p.Public() {
		t.Error("loaded keys differ from the written ones")
	}
	before, _ := os.ReadFile(filepath.Join(dir, "mesh.sign"))
	q, _ := Generate()
	if err := Write(dir, "mesh", q); !errors.Is(err, fs.ErrExist) {
		t.Fatalf("overwrite: got %v, want ErrExist", err)
	}
	after, _ := os.ReadFile(filepath.Join(dir, "mesh.sign"))
	if string(before) != string(after) {
		t.Error("a refused write changed the key")
	}
}

func TestReadableKeyWarns(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, 0o700)
	p, _ := Generate()
	if err := Write(dir, "host", p); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(dir, "host.sign"), 0o644)
	_, warnings, err := Load(dir, "host")
	if err != nil {
		t.Fatal(err)
	}
	if len(warnings) != 1 || !strings.Contains(warnings[0], "host.sign") || !strings.Contains(warnings[0], "chmod 600") {
		t.Errorf("warnings = %q, want one naming host.sign with the fix", warnings)
	}
}

func TestLoadRefusesGarbage(t *testing.T) {
	dir := t.TempDir()
	p, _ := Generate()
	Write(dir, "mesh", p)
	os.WriteFile(filepath.Join(dir, "mesh.sign"), []byte("MUSTER-SIGN-SECRET-KEY-1:short\n"), 0o600)
	if _, _, err := Load(dir, "mesh"); err == nil || !strings.Contains(err.Error(), "mesh.sign") {
		t.Errorf("garbage key loaded or error does not name the file: %v", err)
	}
	if _, _, err := Load(t.TempDir(), "mesh"); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Errorf("missing key: %v", err)
	}
}

func TestPublicParsesAndFingerprintIsStable(t *testing.T) {
	p, _ := Generate()
	pub := p.Public()
	if err := pub.Check(); err != nil {
		t.Fatal(err)
	}
	v, _ := pub.Verifier()
	if !v.Equal(p.Sign.Public()) {
		t.Error("verifier differs from the signing key's public half")
	}
	if pub.Fingerprint() != pub.Fingerprint() || len(pub.Fingerprint()) != 32 {
		t.Error("fingerprint unstable or wrong length")
	}
	q, _ := Generate()
	if q.Public().Fingerprint() == pub.Fingerprint() {
		t.Error("two key pairs share a fingerprint")
	}
	bad := pub
	bad.Sign = "ed25519:xx"
	if bad.Check() == nil {
		t.Error("a broken public key passed Check")
	}
}
