package bundle

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
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

// ReopenSignedTOML takes only the bytes of the digest it is given, and of
// those checks all but the signature: the signer, the context and the
// payload as OpenSignedTOML does.
func TestReopenSignedTOML(t *testing.T) {
	mesh, other := testSigner("mesh"), testSigner("other")
	want := testDeclaration(1 << 10)
	signed, err := SignTOML(want, keysCtx, mesh)
	if err != nil {
		t.Fatal(err)
	}
	var got declaration
	if err := ReopenSignedTOML(signed, sha256.Sum256(signed), keysCtx, pub(mesh), &got); err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("bytes of their own digest: %v", err)
	}

	// A signature that no longer verifies, on bytes whose digest the
	// caller kept: the digest vouches for them, as it would for the
	// bytes that verified. OpenSignedTOML refuses them.
	badSig := bytes.Clone(signed)
	badSig[len(badSig)-1] ^= 1
	if err := ReopenSignedTOML(badSig, sha256.Sum256(badSig), keysCtx, pub(mesh), &declaration{}); err != nil {
		t.Errorf("the signature was checked again: %v", err)
	}
	assertRefused(t, OpenSignedTOML(badSig, keysCtx, pub(mesh), &declaration{}), "a bad signature, opened", ErrBadSignature)

	// Any byte changed is not the bytes verified before.
	for _, pos := range []int{0, len(signed) / 2, len(signed) - 1} {
		assertRefused(t, ReopenSignedTOML(flip(signed, pos, 0), sha256.Sum256(signed), keysCtx, pub(mesh), &declaration{}), fmt.Sprintf("byte %d changed", pos), ErrBadSignature)
	}
	// The signer and the context are checked still.
	assertRefused(t, ReopenSignedTOML(signed, sha256.Sum256(signed), keysCtx, pub(other), &declaration{}), "another signer expected", ErrUnexpectedSigner)
	assertRefused(t, ReopenSignedTOML(signed, sha256.Sum256(signed), reportCtx, pub(mesh), &declaration{}), "another context", ErrContext)
	if err := ReopenSignedTOML(signed, sha256.Sum256(signed), keysCtx, pub(mesh), &struct{ Generation string }{}); err == nil {
		t.Error("a payload that does not decode into v was accepted")
	}
}
