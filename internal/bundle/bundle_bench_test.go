package bundle

import (
	"crypto/ed25519"
	"testing"
)

// The budget is 200 µs per encode and per decode of a 10 KiB declaration for
// one recipient: muster seals one bundle per node per declare, and a mesh
// reads one report per node per report run.

var benchCtx = Context{Kind: "declaration", Node: "n-7f3a9c", Name: "decl/n-7f3a9c/00000042"}

func benchPayload(b *testing.B) []byte {
	p := mustTOML(b, testDeclaration(10<<10))
	if len(p) < 10<<10 || len(p) > 11<<10 {
		b.Fatalf("payload is %d bytes, want about 10 KiB", len(p))
	}
	return p
}

// BenchmarkSeal seals a declaration of about 10 KiB to one recipient, as
// declare seals each node's bundle.
func BenchmarkSeal(b *testing.B) {
	p := benchPayload(b)
	signer, rcpt := testSigner("mesh"), testIdentity(b, "node").Recipient()
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := Seal(p, benchCtx, signer, rcpt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpen(b *testing.B) {
	p := benchPayload(b)
	signer, id := testSigner("mesh"), testIdentity(b, "node")
	data, err := Seal(p, benchCtx, signer, id.Recipient())
	if err != nil {
		b.Fatal(err)
	}
	pub := signer.Public().(ed25519.PublicKey)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := Open(data, benchCtx, id, pub); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSign signs without crypto/ed25519's table, as every command
// signs its few signed bundles.
func BenchmarkSign(b *testing.B) {
	p := benchPayload(b)
	signer := testSigner("mesh")
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := Sign(p, benchCtx, signer); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenSigned(b *testing.B) {
	p := benchPayload(b)
	signer := testSigner("mesh")
	data, err := Sign(p, benchCtx, signer)
	if err != nil {
		b.Fatal(err)
	}
	pub := signer.Public().(ed25519.PublicKey)
	b.SetBytes(int64(len(p)))
	for b.Loop() {
		if _, err := OpenSigned(data, benchCtx, pub); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInspectSealed(b *testing.B) {
	p := benchPayload(b)
	data, err := Seal(p, benchCtx, testSigner("mesh"), testIdentity(b, "node").Recipient())
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := Inspect(data); err != nil {
			b.Fatal(err)
		}
	}
}

// The TOML wrappers add marshalling; measured so the cost of the format and
// of TOML can be told apart.
func BenchmarkSealTOML(b *testing.B) {
	d := testDeclaration(10 << 10)
	signer, rcpt := testSigner("mesh"), testIdentity(b, "node").Recipient()
	for b.Loop() {
		if _, err := SealTOML(d, benchCtx, signer, rcpt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkOpenTOML(b *testing.B) {
	d := testDeclaration(10 << 10)
	signer, id := testSigner("mesh"), testIdentity(b, "node")
	data, err := SealTOML(d, benchCtx, signer, id.Recipient())
	if err != nil {
		b.Fatal(err)
	}
	pub := signer.Public().(ed25519.PublicKey)
	for b.Loop() {
		var got declaration
		if err := OpenTOML(data, benchCtx, id, pub, &got); err != nil {
			b.Fatal(err)
		}
	}
}
