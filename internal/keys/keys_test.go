package keys

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/fault"
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
	got, err := Load(dir, "mesh")
	if err != nil {
		t.Fatalf("load: %v", err)
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

// A key file others can read, or a key directory others can enter, is
// refused, as ssh refuses an open private key: the error names each and
// the hint is the chmod that fixes them. Fixed, the keys load.
func TestKeysOthersCanReachAreRefused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	p, _ := Generate()
	if err := Write(dir, "host", p); err != nil {
		t.Fatal(err)
	}
	sign, age := filepath.Join(dir, "host.sign"), filepath.Join(dir, "host.age")
	for _, c := range []struct {
		name       string
		dir, files os.FileMode
		want, hint []string
	}{
		{"readable key files", 0o700, 0o644,
			[]string{"key file " + age + " has mode 0644", "key file " + sign + " has mode 0644"},
			[]string{"chmod 600 " + age + " " + sign}},
		{"group-readable key files", 0o700, 0o640,
			[]string{"key file " + sign + " has mode 0640"},
			[]string{"chmod 600 " + age + " " + sign}},
		{"directory others can enter", 0o711, 0o600,
			[]string{"key directory " + dir + " has mode 0711"},
			[]string{"chmod 700 " + dir}},
		{"both", 0o755, 0o604,
			[]string{"key directory " + dir + " has mode 0755", "key file " + sign + " has mode 0604"},
			[]string{"chmod 700 " + dir + " && chmod 600 " + age + " " + sign}},
	} {
		t.Run(c.name, func(t *testing.T) {
			os.Chmod(dir, c.dir)
			os.Chmod(age, c.files)
			os.Chmod(sign, c.files)
			got, err := Load(dir, "host")
			if got != nil || fault.ClassOf(err) != fault.Refused {
				t.Fatalf("load: %v, want refused", err)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			for _, h := range c.hint {
				if !strings.Contains(fault.HintOf(err), h) {
					t.Errorf("hint %q does not say %q", fault.HintOf(err), h)
				}
			}
		})
	}
	os.Chmod(dir, 0o700)
	os.Chmod(age, 0o600)
	os.Chmod(sign, 0o600)
	if _, err := Load(dir, "host"); err != nil {
		t.Fatalf("fixed modes: %v", err)
	}
}

// Write refuses a directory others can reach, writing nothing: the keys
// it would write there could not be loaded.
func TestWriteRefusesAnOpenDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "mesh")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	os.Chmod(dir, 0o755)
	p, _ := Generate()
	err := Write(dir, "mesh", p)
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(fault.HintOf(err), "chmod 700 "+dir) {
		t.Fatalf("write: %v (hint %q), want refused with the chmod", err, fault.HintOf(err))
	}
	if Exists(dir, "mesh") {
		t.Error("a refused write left key files")
	}
}

func TestLoadRefusesGarbage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	p, _ := Generate()
	Write(dir, "mesh", p)
	os.WriteFile(filepath.Join(dir, "mesh.sign"), []byte("MUSTER-SIGN-SECRET-KEY-1:short\n"), 0o600)
	if _, err := Load(dir, "mesh"); err == nil || !strings.Contains(err.Error(), "mesh.sign") {
		t.Errorf("garbage key loaded or error does not name the file: %v", err)
	}
	if _, err := Load(filepath.Join(t.TempDir(), "none"), "mesh"); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "does not exist") {
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
	if len(pub.Fingerprint()) != 32 {
		t.Error("fingerprint of the wrong length")
	}
	// A node id is its fingerprint, and names its objects in every
	// spool: it must never change for the same keys.
	fixed := Public{Age: "age1q88u2qmnc9hpje3vafhlhkuxr6ma83awsqk2rndqh6u4wk9t9e9qwxl3g2", Sign: "ed25519:Zfr3UwmfsDwxYwvrfh3sxSjwOtyP-hErc2QgSy1EsE8"}
	if got := fixed.Fingerprint(); got != "2c6b10dc2458199aba5dde934a445649" {
		t.Errorf("fingerprint of fixed keys changed: %s", got)
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

// Load takes the public half of the signing key from ROLE.sign.pub only
// when its MAC is the seed's: a file changed by hand, or another key's,
// is ignored. Load writes nothing; KeepPublic writes the file again for a
// pair whose half Load had to derive, and leaves it alone otherwise.
func TestLoadKeepsThePublicHalfOnlyWhenItAuthenticates(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "k")
	p, _ := Generate()
	if err := Write(dir, "host", p); err != nil {
		t.Fatal(err)
	}
	pubPath := filepath.Join(dir, "host.sign.pub")
	written, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatalf("Write left no public-key file: %v", err)
	}
	if st, _ := os.Stat(pubPath); st.Mode().Perm() != 0o600 {
		t.Errorf("%s has mode %o, want 600", pubPath, st.Mode().Perm())
	}
	want := p.Sign.Public().(ed25519.PublicKey)
	load := func() *Pair {
		t.Helper()
		got, err := Load(dir, "host")
		if err != nil {
			t.Fatal(err)
		}
		return got
	}

	// What the file holds is what Load uses: a half the seed's MAC
	// vouches for is taken without deriving it, and KeepPublic leaves
	// the file as it is.
	other, _ := Generate()
	otherPub := other.Sign.Public().(ed25519.PublicKey)
	vouched := string(pubSealer(p.Sign.Seed()).Seal([]byte(pubPrefix + base64.RawURLEncoding.EncodeToString(otherPub) + "\n")))
	os.WriteFile(pubPath, []byte(vouched), 0o600)
	q := load()
	if got := q.Sign.Public().(ed25519.PublicKey); !got.Equal(otherPub) {
		t.Fatal("Load derived the public half although the file vouched for one")
	}
	if err := KeepPublic(dir, "host", q); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(pubPath); string(again) != vouched {
		t.Error("KeepPublic wrote the file again although Load took the half from it")
	}

	for name, data := range map[string]string{
		"missing":                "",
		"another half, this MAC": strings.Replace(string(written), base64.RawURLEncoding.EncodeToString(want), base64.RawURLEncoding.EncodeToString(otherPub), 1),
		"another key's file":     string(publicFile(other.Sign)),
		"damaged":                string(written[:len(written)-9]) + "\n",
		"garbage":                "ed25519:xyz\n",
	} {
		if name == "missing" {
			os.Remove(pubPath)
		} else {
			os.WriteFile(pubPath, []byte(data), 0o600)
		}
		k := load()
		if got := k.Sign.Public().(ed25519.PublicKey); !got.Equal(want) {
			t.Errorf("%s: Load took the public half from the file", name)
		}
		if msg := []byte("m"); !ed25519.Verify(want, msg, ed25519.Sign(k.Sign, msg)) {
			t.Errorf("%s: the loaded key does not sign for its public half", name)
		}
		if again, err := os.ReadFile(pubPath); name == "missing" && err == nil || name != "missing" && string(again) != data {
			t.Errorf("%s: Load wrote the file", name)
		}
		if err := KeepPublic(dir, "host", k); err != nil {
			t.Fatal(err)
		}
		if again, _ := os.ReadFile(pubPath); string(again) != string(written) {
			t.Errorf("%s: KeepPublic did not write the file again: %q", name, again)
		}
	}
}
