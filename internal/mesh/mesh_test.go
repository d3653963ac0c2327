package mesh

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/spool"
)

func TestInitOpenAndMismatch(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	sp := filepath.Join(base, "spool")
	os.Mkdir(sp, 0o755)
	m, err := Init(ctx, filepath.Join(base, "mesh"), sp, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	got, err := Open(ctx, filepath.Join(base, "mesh"), "")
	if err != nil {
		t.Fatal(err)
	}
	if got.Public() != m.Public() {
		t.Error("opened mesh has other keys")
	}
	// A second mesh cannot take the spool.
	if _, err := Init(ctx, filepath.Join(base, "other"), sp, time.Now()); err == nil {
		t.Fatal("a second mesh took a spool that belongs to a mesh")
	}
	if _, err := os.Stat(filepath.Join(base, "other")); !os.IsNotExist(err) {
		t.Error("a failed init left its directory behind")
	}
	// A mesh key that does not match the spool's published mesh is refused.
	sp2 := filepath.Join(base, "spool2")
	os.Mkdir(sp2, 0o755)
	if _, err := Init(ctx, filepath.Join(base, "mesh2"), sp2, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, err = Open(ctx, filepath.Join(base, "mesh"), sp2)
	if fault.ClassOf(err) != fault.Refused || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("mismatched mesh: got %v (class %v), want a refusal", err, fault.ClassOf(err))
	}
	// A spool with no mesh at all is refused too.
	sp3 := filepath.Join(base, "spool3")
	os.Mkdir(sp3, 0o755)
	if _, err := Open(ctx, filepath.Join(base, "mesh"), sp3); fault.ClassOf(err) != fault.Refused {
		t.Fatalf("empty spool: got %v", err)
	}
}

func TestVerifyPublishedPinsTheFingerprint(t *testing.T) {
	ctx := context.Background()
	base := t.TempDir()
	sp := filepath.Join(base, "spool")
	os.Mkdir(sp, 0o755)
	m, err := Init(ctx, filepath.Join(base, "mesh"), sp, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	d, _ := spool.OpenDir(sp)
	data, err := d.Get(ctx, KeysObject, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyPublished(data, m.Public().Fingerprint()); err != nil {
		t.Fatalf("genuine keys refused: %v", err)
	}
	if _, err := VerifyPublished(data, strings.Repeat("0", 32)); fault.ClassOf(err) != fault.Refused {
		t.Fatalf("keys of another mesh accepted: %v", err)
	}
	flipped := append([]byte(nil), data...)
	flipped[len(flipped)-5] ^= 1
	if _, err := VerifyPublished(flipped, m.Public().Fingerprint()); fault.ClassOf(err) != fault.Refused {
		t.Fatalf("tampered keys accepted: %v", err)
	}
}
