package curve

import (
	"crypto/ed25519"

	"filippo.io/age"
)

// A Batch is how one operation makes its signatures and ephemeral shares,
// chosen by the operation from how many it makes, never from what the
// process did before. Each is a multiplication of the curve's base point,
// made either on its own or from a table of base-point multiples that a
// process builds once, on first use. Building the table costs far more
// than one multiplication saves, so it pays only in an operation that
// makes many: declare seals a bundle per node, while apply signs and seals
// one report. Both ways give the same bytes.
//
// The zero Batch makes every one on its own.
type Batch struct {
	signTable  bool // sign with crypto/ed25519, which builds its table
	shareTable bool // take ephemeral shares from edwards25519's table
}

// How many signatures or shares an operation makes before a table pays for
// itself (the README's Performance section has the measurements).
const (
	signTableAfter  = 16
	shareTableAfter = 32
)

// BatchOf returns the Batch of an operation that makes n signatures and
// seals to n X25519 recipients, or about that many.
func BatchOf(n int) Batch {
	return Batch{signTable: n > signTableAfter, shareTable: n > shareTableAfter}
}

// Sign is ed25519.Sign (pure Ed25519, RFC 8032), byte for byte. It panics,
// as that does, if priv is not ed25519.PrivateKeySize bytes.
func (b Batch) Sign(priv ed25519.PrivateKey, msg []byte) []byte {
	if b.signTable || len(priv) != ed25519.PrivateKeySize {
		return ed25519.Sign(priv, msg)
	}
	return sign(priv, msg)
}

// Sign is ed25519.Sign for an operation that signs once or a few times:
// the zero Batch's Sign.
func Sign(priv ed25519.PrivateKey, msg []byte) []byte { return Batch{}.Sign(priv, msg) }

// Recipients returns rs with each stock age X25519 recipient replaced by
// one that writes the same stanza with fewer scalar multiplications (see
// x25519.go); any other kind is kept as it is.
func (b Batch) Recipients(rs []age.Recipient) []age.Recipient {
	out := make([]age.Recipient, len(rs))
	for i, r := range rs {
		out[i] = r
		if x, ok := r.(*age.X25519Recipient); ok {
			if k, err := newX25519Recipient(x, b.shareTable); err == nil {
				out[i] = k
			}
		}
	}
	return out
}
