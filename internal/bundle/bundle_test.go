package bundle

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"

	"github.com/klauspost/compress/zstd"
	"github.com/muster-tool/muster/internal/fault"
)

var (
	declCtx   = Context{Kind: "declaration", Node: "n-7f3a9c", Name: "decl/n-7f3a9c/00000042"}
	reportCtx = Context{Kind: "report", Node: "n-7f3a9c", Name: "report/n-7f3a9c/00000042-01"}
	keysCtx   = Context{Kind: "public-keys", Name: "keys/mesh"}
)

func pub(k ed25519.PrivateKey) ed25519.PublicKey { return k.Public().(ed25519.PublicKey) }

func randomBytes(t testing.TB, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSeal(t testing.TB, p []byte, c Context, signer ed25519.PrivateKey, rs ...age.Recipient) []byte {
	t.Helper()
	b, err := Seal(p, c, signer, rs...)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func mustSign(t testing.TB, p []byte, c Context, signer ed25519.PrivateKey) []byte {
	t.Helper()
	b, err := Sign(p, c, signer)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// sentinels is every error a decoder may refuse with.
var sentinels = []error{ErrFormat, ErrVersion, ErrMode, ErrTruncated, ErrTrailing, ErrWrongRecipient,
	ErrTampered, ErrBadSignature, ErrUnexpectedSigner, ErrContext, ErrTooLarge}

// assertRefused checks that err is a Refused error wrapping one of want, or
// any sentinel if want is empty.
func assertRefused(t testing.TB, err error, what string, want ...error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: accepted, want a refusal", what)
	}
	if c := fault.ClassOf(err); c != fault.Refused {
		t.Fatalf("%s: error class %v, want refused: %v", what, c, err)
	}
	if len(want) == 0 {
		want = sentinels
	}
	for _, w := range want {
		if errors.Is(err, w) {
			return
		}
	}
	t.Fatalf("%s: error %q wraps none of %v", what, err, want)
}

func TestRoundTrip(t *testing.T) {
	mesh := testSigner("mesh")
	node, other, meshID := testIdentity(t, "node"), testIdentity(t, "other"), testIdentity(t, "mesh")
	payloads := map[string][]byte{
		"empty":       {},
		"one byte":    {'x'},
		"declaration": mustTOML(t, testDeclaration(10<<10)),
		// Incompressible and over one age chunk, so the ciphertext has
		// several STREAM chunks and zstd stores raw blocks.
		"random 200 KiB": randomBytes(t, 200<<10),
		// A whole number of age chunks once signed: the final chunk is full.
		"compressible 1 MiB": bytes.Repeat([]byte("setting = \"value\"\n"), 1<<20/18),
	}
	contexts := []Context{declCtx, keysCtx, {Kind: "join"}}
	for name, p := range payloads {
		for _, c := range contexts {
			t.Run(fmt.Sprintf("%s/%s/sealed", name, c.Kind), func(t *testing.T) {
				data := mustSeal(t, p, c, mesh, node.Recipient(), other.Recipient(), meshID.Recipient())
				for _, id := range []*age.X25519Identity{node, other, meshID} {
					got, err := Open(data, c, id, pub(mesh))
					if err != nil {
						t.Fatal(err)
					}
					if !bytes.Equal(got, p) {
						t.Fatalf("payload differs after round trip: %d bytes, want %d", len(got), len(p))
					}
				}
				got, signer, err := OpenFrom(data, c, node)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, p) || !signer.Equal(pub(mesh)) {
					t.Fatal("OpenFrom: wrong payload or signer")
				}
			})
			t.Run(fmt.Sprintf("%s/%s/signed", name, c.Kind), func(t *testing.T) {
				data := mustSign(t, p, c, mesh)
				got, err := OpenSigned(data, c, pub(mesh))
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, p) {
					t.Fatalf("payload differs after round trip: %d bytes, want %d", len(got), len(p))
				}
			})
		}
	}
}

func TestHeaderLine(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("generation = 42\n")
	for _, tc := range []struct {
		mode Mode
		data []byte
	}{
		{Sealed, mustSeal(t, p, declCtx, mesh, node.Recipient())},
		{Signed, mustSign(t, p, keysCtx, mesh)},
	} {
		line, body, ok := bytes.Cut(tc.data, []byte{'\n'})
		if !ok {
			t.Fatal("no header line")
		}
		want := fmt.Sprintf("muster-bundle/v1 %s %d", tc.mode, len(body))
		if string(line) != want {
			t.Errorf("header line %q, want %q", line, want)
		}
		if tc.mode == Sealed && !bytes.HasPrefix(body, []byte("age-encryption.org/v1\n")) {
			t.Errorf("sealed body does not start with an age header: %q", body[:20])
		}
		if tc.mode == Signed && bytes.Contains(tc.data, []byte("age-encryption.org")) {
			t.Error("signed bundle is encrypted")
		}
	}
}

// craftRecord builds a signed record from the layout in muster-bundle(5),
// independently of the encoder, with every field under the test's control.
func craftRecord(m Mode, version byte, signer ed25519.PrivateKey, c Context, compressed []byte) []byte {
	msg := []byte("muster-bundle/v1 signature\x00" + m.String() + "\x00")
	start := len(msg)
	msg = append(msg, version)
	msg = append(msg, pub(signer)...)
	for _, f := range []string{c.Kind, c.Node, c.Name} {
		msg = binary.BigEndian.AppendUint16(msg, uint16(len(f)))
		msg = append(msg, f...)
	}
	msg = binary.BigEndian.AppendUint32(msg, uint32(len(compressed)))
	msg = append(msg, compressed...)
	msg = append(msg, ed25519.Sign(signer, msg)...)
	return msg[start:]
}

func wrapSigned(rec []byte) []byte {
	return append([]byte(fmt.Sprintf("muster-bundle/v1 signed %d\n", len(rec))), rec...)
}

func wrapSealed(t testing.TB, rec []byte, rs ...age.Recipient) []byte {
	t.Helper()
	var body bytes.Buffer
	w, err := age.Encrypt(&body, rs...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(rec); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return append([]byte(fmt.Sprintf("muster-bundle/v1 sealed %d\n", body.Len())), body.Bytes()...)
}

func compressed(t testing.TB, p []byte) []byte {
	t.Helper()
	b, err := appendCompressed(nil, p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The encoder writes exactly the layout the manual specifies, so a second
// implementation that follows the manual reads and writes the same bytes.
func TestLayoutMatchesManual(t *testing.T) {
	mesh := testSigner("mesh")
	p := []byte("generation = 42\n")
	got := mustSign(t, p, keysCtx, mesh)
	want := wrapSigned(craftRecord(Signed, 1, mesh, keysCtx, compressed(t, p)))
	if !bytes.Equal(got, want) {
		t.Fatalf("Sign wrote\n%q\nthe manual's layout is\n%q", got, want)
	}
	// And a record built by the manual opens.
	sealed := wrapSealed(t, craftRecord(Sealed, 1, mesh, declCtx, compressed(t, p)), testIdentity(t, "node").Recipient())
	if out, err := Open(sealed, declCtx, testIdentity(t, "node"), pub(mesh)); err != nil || !bytes.Equal(out, p) {
		t.Fatalf("Open of a record built from the manual: %q, %v", out, err)
	}
}

func TestInspect(t *testing.T) {
	mesh, node, other := testSigner("mesh"), testIdentity(t, "node"), testIdentity(t, "other")
	p := mustTOML(t, testDeclaration(2<<10))

	sealed := mustSeal(t, p, declCtx, mesh, node.Recipient(), other.Recipient())
	h, err := Inspect(sealed)
	if err != nil {
		t.Fatal(err)
	}
	if h.Version != 1 || h.Mode != Sealed || h.Size != len(sealed) || h.Recipients != 2 {
		t.Errorf("sealed header %+v", h)
	}
	if h.Signer != nil || h.Context != (Context{}) {
		t.Error("Inspect reveals fields of a sealed bundle that are encrypted")
	}
	if want := innerFixed + len(declCtx.Kind) + len(declCtx.Node) + len(declCtx.Name) + len(compressed(t, p)); h.SealedSize != want {
		t.Errorf("sealed size %d, want %d", h.SealedSize, want)
	}

	signed := mustSign(t, p, keysCtx, mesh)
	h, err = Inspect(signed)
	if err != nil {
		t.Fatal(err)
	}
	if h.Mode != Signed || h.Size != len(signed) || h.Context != keysCtx || !h.Signer.Equal(pub(mesh)) || h.ContentSize != len(p) {
		t.Errorf("signed header %+v", h)
	}
}

// region is a span of bundle bytes and the refusals a flipped bit there
// may produce.
type region struct {
	name       string
	start, end int
	want       []error
}

var headerLineErrors = []error{ErrFormat, ErrVersion, ErrTruncated, ErrTrailing, ErrTooLarge}

func sealedRegions(t *testing.T, data []byte) []region {
	h := bytes.IndexByte(data, '\n') + 1
	hdr, err := age.ExtractHeader(bytes.NewReader(data[h:]))
	if err != nil {
		t.Fatal(err)
	}
	a := h + len(hdr)
	return []region{
		{"header line", 0, h, headerLineErrors},
		// A damaged stanza no longer opens with the identity; a damaged
		// MAC line or stanza syntax is caught by the MAC or the parser.
		{"age header", h, a, []error{ErrFormat, ErrWrongRecipient, ErrTampered}},
		{"age nonce and payload", a, len(data), []error{ErrTampered}},
	}
}

func signedRegions(data []byte, c Context) []region {
	h := bytes.IndexByte(data, '\n') + 1
	structure := []error{ErrFormat, ErrTruncated, ErrTrailing, ErrTooLarge, ErrBadSignature}
	kindLen := h + 1 + 32
	nodeLen := kindLen + 2 + len(c.Kind)
	nameLen := nodeLen + 2 + len(c.Node)
	payLen := nameLen + 2 + len(c.Name)
	sig := len(data) - 64
	return []region{
		{"header line", 0, h, headerLineErrors},
		{"version", h, h + 1, []error{ErrVersion}},
		{"signer key", h + 1, kindLen, []error{ErrBadSignature}},
		{"kind length", kindLen, kindLen + 2, structure},
		// Context bytes are signed; a flip may also make them invalid
		// UTF-8 or a control character.
		{"kind", kindLen + 2, nodeLen, []error{ErrBadSignature, ErrFormat}},
		{"node length", nodeLen, nodeLen + 2, structure},
		{"node", nodeLen + 2, nameLen, []error{ErrBadSignature, ErrFormat}},
		{"name length", nameLen, nameLen + 2, structure},
		{"name", nameLen + 2, payLen, []error{ErrBadSignature, ErrFormat}},
		{"payload length", payLen, payLen + 4, []error{ErrTruncated, ErrTrailing, ErrTooLarge}},
		// The signature covers the compressed bytes, so tampering is
		// caught before anything is decompressed.
		{"payload", payLen + 4, sig, []error{ErrBadSignature}},
		{"signature", sig, len(data), []error{ErrBadSignature}},
	}
}

func flip(data []byte, pos int, bit uint) []byte {
	b := bytes.Clone(data)
	b[pos] ^= 1 << bit
	return b
}

func TestFlippedBitSealed(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	data := mustSeal(t, mustTOML(t, testDeclaration(600)), declCtx, mesh, node.Recipient())
	for _, r := range sealedRegions(t, data) {
		if r.start >= r.end {
			t.Fatalf("region %s is empty", r.name)
		}
		for pos := r.start; pos < r.end; pos++ {
			// Every bit of the header line, one bit per byte elsewhere,
			// rotating which bit.
			bits := []uint{uint(pos % 8)}
			if r.name == "header line" {
				bits = []uint{0, 1, 2, 3, 4, 5, 6, 7}
			}
			for _, bit := range bits {
				bad := flip(data, pos, bit)
				what := fmt.Sprintf("%s: bit %d of byte %d", r.name, bit, pos)
				_, err := Open(bad, declCtx, node, pub(mesh))
				assertRefused(t, err, what, r.want...)
				_, _, err = OpenFrom(bad, declCtx, node)
				assertRefused(t, err, what+" (OpenFrom)", r.want...)
			}
		}
	}
}

func TestFlippedBitSigned(t *testing.T) {
	mesh := testSigner("mesh")
	data := mustSign(t, mustTOML(t, testDeclaration(600)), declCtx, mesh)
	for _, r := range signedRegions(data, declCtx) {
		if r.start >= r.end {
			t.Fatalf("region %s is empty", r.name)
		}
		for pos := r.start; pos < r.end; pos++ {
			bits := []uint{uint(pos % 8)}
			if r.end-r.start <= 64 {
				bits = []uint{0, 1, 2, 3, 4, 5, 6, 7}
			}
			for _, bit := range bits {
				bad := flip(data, pos, bit)
				what := fmt.Sprintf("%s: bit %d of byte %d", r.name, bit, pos)
				_, err := OpenSigned(bad, declCtx, pub(mesh))
				assertRefused(t, err, what, r.want...)
				// Spool verification has no key to expect, yet catches
				// every damaged signed object.
				_, err = Inspect(bad)
				assertRefused(t, err, what+" (Inspect)", r.want...)
			}
		}
	}
}

func TestTruncated(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := mustTOML(t, testDeclaration(600))
	for _, tc := range []struct {
		name string
		data []byte
		open func([]byte) error
	}{
		{"sealed", mustSeal(t, p, declCtx, mesh, node.Recipient()), func(b []byte) error {
			_, err := Open(b, declCtx, node, pub(mesh))
			return err
		}},
		{"signed", mustSign(t, p, keysCtx, mesh), func(b []byte) error {
			_, err := OpenSigned(b, keysCtx, pub(mesh))
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := bytes.IndexByte(tc.data, '\n') + 1
			n := len(tc.data)
			cuts := []int{0, 1, 7, h / 2, h - 2, h - 1, h, h + 1, h + 21, n / 2, n - 65, n - 64, n - 17, n - 16, n - 2, n - 1}
			for k := 0; k < n; k += 37 {
				cuts = append(cuts, k)
			}
			for _, k := range cuts {
				what := fmt.Sprintf("cut to %d of %d bytes", k, n)
				assertRefused(t, tc.open(tc.data[:k]), what, ErrTruncated)
				_, err := Inspect(tc.data[:k])
				assertRefused(t, err, what+" (Inspect)", ErrTruncated)
			}
		})
	}
}

func TestTrailingBytes(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("generation = 42\n")
	sealed := mustSeal(t, p, declCtx, mesh, node.Recipient())
	signed := mustSign(t, p, keysCtx, mesh)
	for _, extra := range [][]byte{{0}, {'\n'}, []byte("x"), signed} {
		_, err := Open(append(bytes.Clone(sealed), extra...), declCtx, node, pub(mesh))
		assertRefused(t, err, fmt.Sprintf("sealed + %q", extra), ErrTrailing)
		_, err = OpenSigned(append(bytes.Clone(signed), extra...), keysCtx, pub(mesh))
		assertRefused(t, err, fmt.Sprintf("signed + %q", extra), ErrTrailing)
		_, err = Inspect(append(bytes.Clone(signed), extra...))
		assertRefused(t, err, "Inspect", ErrTrailing)
	}
	// Bytes after the signature inside the record, with a header line that
	// counts them, are refused too.
	rec := craftRecord(Signed, 1, mesh, keysCtx, compressed(t, p))
	_, err := OpenSigned(wrapSigned(append(rec, 'x')), keysCtx, pub(mesh))
	assertRefused(t, err, "byte after the signature", ErrTrailing)
}

func TestWrongSigner(t *testing.T) {
	mesh, attacker := testSigner("mesh"), testSigner("attacker")
	node := testIdentity(t, "node")
	p := []byte("generation = 43\n")

	// A validly signed bundle by another key: the recipient's public key is
	// all an attacker needs to make one.
	sealed := mustSeal(t, p, declCtx, attacker, node.Recipient())
	_, err := Open(sealed, declCtx, node, pub(mesh))
	assertRefused(t, err, "sealed, signed by another key", ErrUnexpectedSigner)
	if !strings.Contains(err.Error(), fmt.Sprintf("%x, expected %x", pub(attacker), pub(mesh))) {
		t.Errorf("error does not name both keys: %v", err)
	}
	// OpenFrom hands the real signer to the caller to compare.
	_, signer, err := OpenFrom(sealed, declCtx, node)
	if err != nil || !signer.Equal(pub(attacker)) {
		t.Fatalf("OpenFrom: signer %x, %v; want the attacker's key", signer, err)
	}

	signed := mustSign(t, p, keysCtx, attacker)
	_, err = OpenSigned(signed, keysCtx, pub(mesh))
	assertRefused(t, err, "signed by another key", ErrUnexpectedSigner)

	// Re-signing: the attacker replaces key and signature of a mesh bundle.
	orig := mustSign(t, p, keysCtx, mesh)
	h := bytes.IndexByte(orig, '\n') + 1
	in, err := parseInner(orig[h:], "test")
	if err != nil {
		t.Fatal(err)
	}
	resigned := wrapSigned(craftRecord(Signed, 1, attacker, keysCtx, in.payload))
	_, err = OpenSigned(resigned, keysCtx, pub(mesh))
	assertRefused(t, err, "re-signed by another key", ErrUnexpectedSigner)

	// Only the signer key swapped: the signature no longer verifies.
	swapped := bytes.Clone(orig)
	copy(swapped[h+1:], pub(attacker))
	_, err = OpenSigned(swapped, keysCtx, pub(mesh))
	assertRefused(t, err, "signer key swapped", ErrBadSignature)

	// A zero signature.
	zero := bytes.Clone(orig)
	clear(zero[len(zero)-64:])
	_, err = OpenSigned(zero, keysCtx, pub(mesh))
	assertRefused(t, err, "zero signature", ErrBadSignature)
}

func TestWrongRecipient(t *testing.T) {
	mesh, node, other := testSigner("mesh"), testIdentity(t, "node"), testIdentity(t, "other")
	data := mustSeal(t, []byte("generation = 42\n"), declCtx, mesh, other.Recipient())
	_, err := Open(data, declCtx, node, pub(mesh))
	assertRefused(t, err, "encrypted to another recipient", ErrWrongRecipient)
	_, _, err = OpenFrom(data, declCtx, node)
	assertRefused(t, err, "encrypted to another recipient (OpenFrom)", ErrWrongRecipient)
	// A passphrase identity is no way in either.
	scrypt, err := age.NewScryptIdentity("guess")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Open(data, declCtx, scrypt, pub(mesh))
	assertRefused(t, err, "scrypt identity", ErrWrongRecipient)
}

func TestContextMismatch(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("generation = 42\n")
	sealed := mustSeal(t, p, declCtx, mesh, node.Recipient())
	signed := mustSign(t, p, declCtx, mesh)
	for _, tc := range []struct {
		field string
		c     Context
		msg   string
	}{
		{"kind", Context{Kind: "report", Node: declCtx.Node, Name: declCtx.Name}, `kind is "declaration", expected "report"`},
		{"node", Context{Kind: declCtx.Kind, Node: "n-other", Name: declCtx.Name}, `node is "n-7f3a9c", expected "n-other"`},
		{"name", Context{Kind: declCtx.Kind, Node: declCtx.Node, Name: "decl/n-7f3a9c/00000041"}, `name is "decl/n-7f3a9c/00000042", expected "decl/n-7f3a9c/00000041"`},
		{"node emptied", Context{Kind: declCtx.Kind, Name: declCtx.Name}, `node is "n-7f3a9c", expected ""`},
	} {
		t.Run(tc.field, func(t *testing.T) {
			_, err := Open(sealed, tc.c, node, pub(mesh))
			assertRefused(t, err, "sealed", ErrContext)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
			_, err = OpenSigned(signed, tc.c, pub(mesh))
			assertRefused(t, err, "signed", ErrContext)
			if !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("error %q does not say %q", err, tc.msg)
			}
		})
	}
	// The message names the object the caller asked for.
	_, err := Open(sealed, reportCtx, node, pub(mesh))
	if want := `bundle "report/n-7f3a9c/00000042-01": context mismatch: kind is "declaration", expected "report"`; err == nil || err.Error() != want {
		t.Errorf("error %v, want %q", err, want)
	}
}

// The mode is signed: a recipient cannot strip the encryption and publish a
// sealed record as a signed one, nor can anyone encrypt a public record and
// pass it off as sealed.
func TestModeIsBound(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("secret = \"s3cr3t\"\n")
	sealedRec := craftRecord(Sealed, 1, mesh, declCtx, compressed(t, p))
	_, err := OpenSigned(wrapSigned(sealedRec), declCtx, pub(mesh))
	assertRefused(t, err, "sealed record published as signed", ErrBadSignature)

	signedRec := craftRecord(Signed, 1, mesh, declCtx, compressed(t, p))
	_, err = Open(wrapSealed(t, signedRec, node.Recipient()), declCtx, node, pub(mesh))
	assertRefused(t, err, "signed record encrypted as sealed", ErrBadSignature)

	// And a bundle of the other mode is refused outright.
	_, err = Open(mustSign(t, p, declCtx, mesh), declCtx, node, pub(mesh))
	assertRefused(t, err, "Open of a signed bundle", ErrMode)
	_, err = OpenSigned(mustSeal(t, p, declCtx, mesh, node.Recipient()), declCtx, pub(mesh))
	assertRefused(t, err, "OpenSigned of a sealed bundle", ErrMode)
}

func TestUnknownVersion(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("generation = 42\n")
	signed := mustSign(t, p, keysCtx, mesh)
	sealed := mustSeal(t, p, declCtx, mesh, node.Recipient())
	for _, v := range []string{"v2", "v0", "v10", "v01"} {
		_, err := OpenSigned(bytes.Replace(signed, []byte("/v1 "), []byte("/"+v+" "), 1), keysCtx, pub(mesh))
		assertRefused(t, err, "header "+v, ErrVersion)
		_, err = Open(bytes.Replace(sealed, []byte("/v1 "), []byte("/"+v+" "), 1), declCtx, node, pub(mesh))
		assertRefused(t, err, "header "+v, ErrVersion)
		if !strings.Contains(err.Error(), v) {
			t.Errorf("error does not name version %s: %v", v, err)
		}
	}
	// A validly signed record of another version inside a v1 header.
	rec := craftRecord(Signed, 2, mesh, keysCtx, compressed(t, p))
	_, err := OpenSigned(wrapSigned(rec), keysCtx, pub(mesh))
	assertRefused(t, err, "record version 2", ErrVersion)
	rec = craftRecord(Sealed, 2, mesh, declCtx, compressed(t, p))
	_, err = Open(wrapSealed(t, rec, node.Recipient()), declCtx, node, pub(mesh))
	assertRefused(t, err, "sealed record version 2", ErrVersion)
}

func TestNotABundle(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	sealed := mustSeal(t, []byte("x = 1\n"), declCtx, mesh, node.Recipient())
	ageFile := sealed[bytes.IndexByte(sealed, '\n')+1:]
	for _, tc := range []struct {
		name string
		data []byte
		want error
	}{
		{"nil", nil, ErrTruncated},
		{"text", []byte("generation = 42\n"), ErrFormat},
		{"bare age file", ageFile, ErrFormat},
		{"long first line", append([]byte("muster-bundle/v1 sealed "), bytes.Repeat([]byte("1"), 100)...), ErrFormat},
		{"leading zero", bytes.Replace(sealed, []byte("sealed "), []byte("sealed 0"), 1), ErrFormat},
		{"sign in length", bytes.Replace(sealed, []byte("sealed "), []byte("sealed +"), 1), ErrFormat},
		{"extra field", bytes.Replace(sealed, []byte("sealed "), []byte("sealed x "), 1), ErrFormat},
		{"unknown mode", bytes.Replace(sealed, []byte("sealed "), []byte("packed "), 1), ErrFormat},
		{"CRLF", bytes.Replace(sealed, []byte("\n"), []byte("\r\n"), 1), ErrFormat},
		{"huge length", []byte("muster-bundle/v1 sealed 9999999999\n"), ErrTooLarge},
		{"age header only", []byte(fmt.Sprintf("muster-bundle/v1 sealed %d\nage-encryption.org/v1\n", len("age-encryption.org/v1\n"))), ErrFormat},
		{"empty signed body", []byte("muster-bundle/v1 signed 0\n"), ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Open(tc.data, declCtx, node, pub(mesh))
			if !errors.Is(err, ErrMode) {
				assertRefused(t, err, "Open", tc.want)
			}
			_, err = Inspect(tc.data)
			assertRefused(t, err, "Inspect", tc.want)
		})
	}
}

// zstd frames built by hand, each inside a validly signed record, so only
// the payload checks stand between them and the caller.
func TestPayloadFrames(t *testing.T) {
	mesh := testSigner("mesh")
	valid := compressed(t, []byte("hello, world\n"))
	rle := func(fcs byte, blocks int) []byte {
		b := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, fcs}
		for i := range blocks {
			h := uint32(maxBlock)<<3 | 1<<1
			if i == blocks-1 {
				h |= 1
			}
			b = append(b, byte(h), byte(h>>8), byte(h>>16), 'A')
		}
		return b
	}
	noSize := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x00, 0x00, 3<<3 | 1, 0, 0, 'a', 'b', 'c'}
	bigWindow := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x40, 14 << 3, 0, 0, 3<<3 | 1, 0, 0, 'a', 'b', 'c'}
	withDict := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x21, 7, 3, 3<<3 | 1, 0, 0, 'a', 'b', 'c'}
	reserved := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x28, 3, 3<<3 | 1, 0, 0, 'a', 'b', 'c'}
	reservedBlock := []byte{0x28, 0xB5, 0x2F, 0xFD, 0x20, 3, 3<<3 | 3<<1 | 1, 0, 0, 'a', 'b', 'c'}
	skippable := []byte{0x50, 0x2A, 0x4D, 0x18, 0, 0, 0, 0}
	overSize := bytes.Clone(valid)
	overSize[5] = 200 // declares more than the frame holds
	badChecksum := bytes.Clone(valid)
	badChecksum[len(badChecksum)-1] ^= 1

	for _, tc := range []struct {
		name  string
		frame []byte
		want  error
	}{
		{"empty", nil, ErrFormat},
		{"not zstd", []byte("hello, world\n"), ErrFormat},
		{"skippable frame", skippable, ErrFormat},
		{"no content size", noSize, ErrFormat},
		{"dictionary", withDict, ErrFormat},
		{"reserved bit", reserved, ErrFormat},
		{"reserved block type", reservedBlock, ErrFormat},
		{"window over limit", bigWindow, ErrTooLarge},
		{"truncated frame", valid[:len(valid)-1], ErrFormat},
		{"second frame", append(bytes.Clone(valid), valid...), ErrTrailing},
		{"byte after frame", append(bytes.Clone(valid), 0), ErrTrailing},
		{"declares more than it holds", overSize, ErrFormat},
		{"checksum", badChecksum, ErrFormat},
		// 8192 RLE blocks of 128 KiB regenerate 1 GiB from 32 KiB while
		// the frame declares 100 bytes: refused before decompressing.
		{"RLE blocks past declared size", rle(100, 8192), ErrTooLarge},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := wrapSigned(craftRecord(Signed, 1, mesh, keysCtx, tc.frame))
			_, err := OpenSigned(data, keysCtx, pub(mesh))
			assertRefused(t, err, "OpenSigned", tc.want)
		})
	}
}

// A zstd bomb: a small, validly signed and sealed bundle whose payload
// declares a size past MaxPayload.
func TestZstdBomb(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	// Text-like content: zstd encodes long runs of zeros far more slowly.
	line := []byte("setting = \"value\"\n")
	big := bytes.Repeat(line, MaxPayload/len(line)+1)
	bomb := compressed(t, big[:MaxPayload+1])
	if len(bomb) > 64<<10 {
		t.Fatalf("bomb is %d bytes; expected a small frame", len(bomb))
	}
	sealed := wrapSealed(t, craftRecord(Sealed, 1, mesh, declCtx, bomb), node.Recipient())
	_, err := Open(sealed, declCtx, node, pub(mesh))
	assertRefused(t, err, "sealed bomb", ErrTooLarge)
	signed := wrapSigned(craftRecord(Signed, 1, mesh, keysCtx, bomb))
	_, err = OpenSigned(signed, keysCtx, pub(mesh))
	assertRefused(t, err, "signed bomb", ErrTooLarge)
	_, err = Inspect(signed)
	assertRefused(t, err, "Inspect of the bomb", ErrTooLarge)

	// The limit itself is allowed: checked on a small limit, since
	// decompressing 64 MiB would make the test slow.
	frame := compressed(t, big[:5000])
	if _, err := decompress(frame, 5000, "test"); err != nil {
		t.Fatalf("payload of exactly the limit: %v", err)
	}
	_, err = decompress(frame, 4999, "test")
	assertRefused(t, err, "payload one byte over the limit", ErrTooLarge)
}

// A frame that lies about its size is stopped by the decoder after at most
// one block, without allocating for what it would have produced.
func TestZstdLyingSize(t *testing.T) {
	mesh := testSigner("mesh")
	// The frame is made by a stock encoder at its default level, whose
	// blocks stay within zstd's block limit, so the only lie is the
	// declared size: a windowed frame with a 4-byte content size after
	// the window descriptor declares 70000 bytes instead of 32 MiB.
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedDefault), zstd.WithWindowSize(MaxWindow), zstd.WithZeroFrames(true))
	if err != nil {
		t.Fatal(err)
	}
	frame := enc.EncodeAll(make([]byte, 32<<20), nil)
	if frame[4]&0x20 != 0 || frame[4]>>6 != 2 {
		t.Fatalf("unexpected frame header descriptor %#x", frame[4])
	}
	binary.LittleEndian.PutUint32(frame[6:], 70000)
	data := wrapSigned(craftRecord(Signed, 1, mesh, keysCtx, frame))

	// Warm the decoder so its own buffers are not counted.
	if _, err := OpenSigned(mustSign(t, []byte("x"), keysCtx, mesh), keysCtx, pub(mesh)); err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = OpenSigned(data, keysCtx, pub(mesh))
	runtime.ReadMemStats(&after)
	assertRefused(t, err, "lying size", ErrTooLarge)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("decoding a frame that declares 70000 bytes allocated %d bytes", grew)
	}
}

func TestEncodeErrors(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	p := []byte("x = 1\n")
	_, err := Seal(p, declCtx, mesh)
	if !errors.Is(err, ErrNoRecipients) || fault.ClassOf(err) == fault.Refused {
		t.Errorf("Seal without recipients: %v", err)
	}
	if _, err := Seal(p, declCtx, mesh, nil); err == nil {
		t.Error("Seal to a nil recipient succeeded")
	}
	for _, c := range []Context{
		{},
		{Node: "n1", Name: "x"},
		{Kind: "declaration", Name: "a\nb"},
		{Kind: "declaration", Node: "\xff"},
		{Kind: strings.Repeat("k", MaxContextField+1)},
	} {
		if _, err := Sign(p, c, mesh); err == nil {
			t.Errorf("Sign accepted context %q", c)
		}
		if _, err := Seal(p, c, mesh, node.Recipient()); err == nil {
			t.Errorf("Seal accepted context %q", c)
		}
	}
	if _, err := Sign(p, keysCtx, mesh[:10]); err == nil {
		t.Error("Sign accepted a short private key")
	}
	if _, err := Sign(make([]byte, MaxPayload+1), keysCtx, mesh); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Sign of an oversized payload: %v", err)
	}
	// Decoders given bad keys fail, and do not panic.
	data := mustSeal(t, p, declCtx, mesh, node.Recipient())
	if _, err := Open(data, declCtx, node, pub(mesh)[:5]); err == nil {
		t.Error("Open accepted a short signer key")
	}
	if _, err := Open(data, declCtx, nil, pub(mesh)); err == nil {
		t.Error("Open accepted a nil identity")
	}
	if _, err := OpenSigned(mustSign(t, p, keysCtx, mesh), keysCtx, nil); err == nil {
		t.Error("OpenSigned accepted a nil signer key")
	}
}

// The shared zstd encoder and decoder, and the pooled buffers records are
// built in, are used from many goroutines at once; what Seal and Sign
// return stays whole after later calls.
func TestConcurrent(t *testing.T) {
	mesh, node := testSigner("mesh"), testIdentity(t, "node")
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			type kept struct {
				c    Context
				p, b []byte
			}
			var signed []kept
			defer func() {
				for _, k := range signed {
					if got, err := OpenSigned(k.b, k.c, pub(mesh)); err != nil || !bytes.Equal(got, k.p) {
						t.Errorf("goroutine %d: signed %s later: %q, %v", g, k.c.Name, got, err)
					}
				}
			}()
			for i := range 10 {
				p := []byte(fmt.Sprintf("goroutine = %d\niteration = %d\n%s", g, i, strings.Repeat("pad ", g*100)))
				c := Context{Kind: "report", Node: fmt.Sprintf("n%d", g), Name: fmt.Sprintf("r/%d/%d", g, i)}
				data, err := Seal(p, c, mesh, node.Recipient())
				if err != nil {
					t.Error(err)
					return
				}
				got, err := Open(data, c, node, pub(mesh))
				if err != nil || !bytes.Equal(got, p) {
					t.Errorf("goroutine %d: %q, %v", g, got, err)
					return
				}
				if data, err = Sign(p, c, mesh); err != nil {
					t.Error(err)
					return
				}
				signed = append(signed, kept{c, p, data})
			}
		})
	}
	wg.Wait()
}
