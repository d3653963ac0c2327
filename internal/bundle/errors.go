package bundle

import (
	"errors"
	"fmt"

	"github.com/muster-tool/muster/internal/fault"
)

// Sentinel errors for each way a bundle can be refused. Every decoding error
// wraps exactly one of them (test with errors.Is) and is classed
// fault.Refused, because a bundle that fails any check must not be acted on.
// Their texts follow the name of the object, as in
// `bundle "decl/n1/42": context mismatch: kind is "report", expected "declaration"`.
var (
	// ErrFormat: the bytes are not a bundle as muster-bundle(5) lays it out.
	ErrFormat = errors.New("malformed")
	// ErrVersion: the header or the signed record names a format version
	// this muster does not know.
	ErrVersion = errors.New("unknown format version")
	// ErrMode: a signed bundle where a sealed one was expected, or the
	// reverse.
	ErrMode = errors.New("wrong mode")
	// ErrTruncated: the bundle ends before its header says it does.
	ErrTruncated = errors.New("truncated")
	// ErrTrailing: there are bytes after the end of the bundle or of one of
	// its parts.
	ErrTrailing = errors.New("trailing bytes")
	// ErrWrongRecipient: no recipient stanza opens with the identity given.
	ErrWrongRecipient = errors.New("not encrypted to this identity")
	// ErrTampered: the encryption does not authenticate; the ciphertext was
	// damaged or altered.
	ErrTampered = errors.New("ciphertext fails authentication")
	// ErrBadSignature: the signature does not verify for the key the bundle
	// names.
	ErrBadSignature = errors.New("signature does not verify")
	// ErrUnexpectedSigner: the bundle is validly signed, but not by the key
	// the caller expects.
	ErrUnexpectedSigner = errors.New("signed by an unexpected key")
	// ErrContext: the bundle is validly signed for another kind, node or
	// name; it was replayed or misfiled.
	ErrContext = errors.New("context mismatch")
	// ErrTooLarge: a size is over its limit, such as a payload that
	// decompresses past MaxPayload.
	ErrTooLarge = errors.New("too large")
	// ErrNoRecipients: Seal was called without recipients. It is a caller's
	// mistake, not a refusal.
	ErrNoRecipients = errors.New("no recipients to seal to")
)

// refuse builds a Refused error that names the object, wraps the sentinel and
// adds what exactly was wrong.
func refuse(subject string, sentinel error, format string, args ...any) error {
	detail := fmt.Sprintf(format, args...)
	if detail == "" {
		return fault.New(fault.Refused, fmt.Errorf("%s: %w", subject, sentinel))
	}
	return fault.New(fault.Refused, fmt.Errorf("%s: %w: %s", subject, sentinel, detail))
}

// subject names the object an error is about, from what the caller expects.
func subject(c Context) string {
	switch {
	case c.Name != "":
		return fmt.Sprintf("bundle %q", c.Name)
	case c.Node != "":
		return fmt.Sprintf("%s bundle for node %q", c.Kind, c.Node)
	case c.Kind != "":
		return c.Kind + " bundle"
	}
	return "bundle"
}
