package bundle

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/muster-tool/muster/internal/fault"
)

func TestTOMLRoundTrip(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	want := testDeclaration(3 << 10)

	sealed, err := SealTOML(want, declCtx, mesh, node.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var got declaration
	if err := OpenTOML(sealed, declCtx, node, pub(mesh), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sealed TOML round trip differs:\n%+v\nwant\n%+v", got, want)
	}

	var from declaration
	signer, err := OpenFromTOML(sealed, declCtx, node, &from)
	if err != nil || !signer.Equal(pub(mesh)) || !reflect.DeepEqual(from, want) {
		t.Fatalf("OpenFromTOML: signer %x, %v", signer, err)
	}

	signed, err := SignTOML(want, keysCtx, mesh)
	if err != nil {
		t.Fatal(err)
	}
	got = declaration{}
	if err := OpenSignedTOML(signed, keysCtx, pub(mesh), &got); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatal("signed TOML round trip differs")
	}
}

func TestTOMLStrict(t *testing.T) {
	mesh := testSigner("mesh")
	type newer struct {
		Generation int
		Node       string
		Rollout    string
		Resources  []struct {
			Kind   string
			Name   string
			Checks []string
		}
	}
	v := newer{Generation: 7, Node: "n1", Rollout: "canary"}
	v.Resources = append(v.Resources, struct {
		Kind   string
		Name   string
		Checks []string
	}{"file", "motd", []string{"exists"}})
	data, err := SignTOML(v, keysCtx, mesh)
	if err != nil {
		t.Fatal(err)
	}
	var got declaration
	err = OpenSignedTOML(data, keysCtx, pub(mesh), &got)
	if !errors.Is(err, ErrPayload) {
		t.Fatalf("unknown keys: %v, want ErrPayload", err)
	}
	for _, key := range []string{`"Rollout"`, `"Resources.Checks"`} {
		if !strings.Contains(err.Error(), key) {
			t.Errorf("error %q does not name key %s", err, key)
		}
	}
	// The signer is trusted; the content is not understood. That is a
	// failure, not a security refusal.
	if fault.ClassOf(err) == fault.Refused {
		t.Errorf("unknown keys classed as refused: %v", err)
	}

	type wrongType struct{ Generation string }
	data, err = SignTOML(struct{ Generation int }{7}, keysCtx, mesh)
	if err != nil {
		t.Fatal(err)
	}
	err = OpenSignedTOML(data, keysCtx, pub(mesh), &wrongType{})
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("type mismatch: %v, want ErrPayload naming the line", err)
	}

	// Refusals of the bundle itself come first and keep their class.
	err = OpenSignedTOML(data, reportCtx, pub(mesh), &struct{ Generation int }{})
	assertRefused(t, err, "wrong context", ErrContext)
}

// TestTOMLPayloadCaps: a payload nested past the cap, signed by a key the
// reader trusts, is not handed to the TOML library (five million levels
// would overflow its stack): it is ErrPayload, naming the line and the cap.
func TestTOMLPayloadCaps(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	deep := "generation = 1\nnode = " + strings.Repeat("[", 5_000_000) + strings.Repeat("]", 5_000_000) + "\n"
	sealed, err := Seal([]byte(deep), declCtx, mesh, node.Recipient())
	if err != nil {
		t.Fatal(err)
	}
	var got declaration
	err = OpenTOML(sealed, declCtx, node, pub(mesh), &got)
	if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), "line 2: nesting deeper than 64 levels (the cap on TOML nesting)") {
		t.Fatalf("got %v", err)
	}
}
