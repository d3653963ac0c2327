package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"filippo.io/age"
)

// recordBufs holds the buffers records are built in. A record is copied
// out (into age's stream, or behind a header line) as soon as it is made,
// so a declare's sealing reuses a few buffers instead of allocating one
// per node, sized for the payload before compression.
var recordBufs = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledRecord is the largest buffer kept for reuse: a rare large
// bundle's buffer is left to the collector rather than held.
const maxPooledRecord = 256 << 10

// withRecord builds the record of payload for mode m and context c in a
// pooled buffer and passes it to use, which must not keep it.
func withRecord(m Mode, payload []byte, c Context, signer ed25519.PrivateKey, use func(rec []byte) error) error {
	buf := recordBufs.Get().(*[]byte)
	msg, rec, err := record(*buf, m, payload, c, signer)
	if err == nil {
		err = use(rec)
	}
	if cap(msg) <= maxPooledRecord {
		*buf = msg[:0]
	}
	recordBufs.Put(buf)
	return err
}

// record compresses payload and signs it for mode m and context c,
// returning the signed record, rec, built in dst's room if it has enough.
// The record is built behind the signed-message prefix so that ed25519
// signs it in place; msg is the whole buffer, prefix and all.
func record(dst []byte, m Mode, payload []byte, c Context, signer ed25519.PrivateKey) (msg, rec []byte, err error) {
	subj := subject(c)
	if len(signer) != ed25519.PrivateKeySize {
		return dst, nil, fmt.Errorf("%s: signer key is %d bytes, not %d", subj, len(signer), ed25519.PrivateKeySize)
	}
	if err := checkContext(c); err != nil {
		return dst, nil, fmt.Errorf("%s: %w", subj, err)
	}
	if len(payload) > MaxPayload {
		return dst, nil, fmt.Errorf("%s: %w: payload is %d bytes, limit is %d", subj, ErrTooLarge, len(payload), MaxPayload)
	}
	prefix := signedPrefix(m)
	// Room for an incompressible payload up to 64 KiB; the encoder grows
	// the buffer beyond that.
	msg = dst[:0]
	if need := len(prefix) + innerFixed + len(c.Kind) + len(c.Node) + len(c.Name) + min(len(payload), 64<<10) + 64; cap(msg) < need {
		msg = make([]byte, 0, need)
	}
	msg = append(msg, prefix...)
	msg = appendInnerHead(msg, signer.Public().(ed25519.PublicKey), c)
	lenAt := len(msg)
	msg = append(msg, 0, 0, 0, 0)
	msg, err = appendCompressed(msg, payload)
	if err != nil {
		return dst, nil, fmt.Errorf("%s: compressing payload: %w", subj, err)
	}
	n := len(msg) - lenAt - 4
	if n > MaxCompressed {
		return dst, nil, fmt.Errorf("%s: %w: compressed payload is %d bytes, limit is %d", subj, ErrTooLarge, n, MaxCompressed)
	}
	binary.BigEndian.PutUint32(msg[lenAt:], uint32(n))
	msg = append(msg, ed25519.Sign(signer, msg)...)
	return msg, msg[len(prefix):], nil
}

func seal(payload []byte, c Context, signer ed25519.PrivateKey, recipients []age.Recipient) ([]byte, error) {
	subj := subject(c)
	if len(recipients) == 0 {
		return nil, fmt.Errorf("%s: %w", subj, ErrNoRecipients)
	}
	for i, r := range recipients {
		if r == nil {
			return nil, fmt.Errorf("%s: recipient %d is nil", subj, i)
		}
	}
	var body bytes.Buffer
	err := withRecord(Sealed, payload, c, signer, func(rec []byte) error {
		body.Grow(len(rec) + 256*len(recipients) + 128)
		w, err := age.Encrypt(&body, recipients...)
		if err != nil {
			return fmt.Errorf("%s: encrypting: %w", subj, err)
		}
		if _, err := w.Write(rec); err != nil {
			return fmt.Errorf("%s: encrypting: %w", subj, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("%s: encrypting: %w", subj, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if body.Len() > MaxBody {
		return nil, fmt.Errorf("%s: %w: body is %d bytes, limit is %d", subj, ErrTooLarge, body.Len(), MaxBody)
	}
	out := make([]byte, 0, headerMax+body.Len())
	out = appendHeaderLine(out, Sealed, body.Len())
	return append(out, body.Bytes()...), nil
}

func sign(payload []byte, c Context, signer ed25519.PrivateKey) ([]byte, error) {
	var out []byte
	err := withRecord(Signed, payload, c, signer, func(rec []byte) error {
		out = make([]byte, 0, headerMax+len(rec))
		out = appendHeaderLine(out, Signed, len(rec))
		out = append(out, rec...)
		return nil
	})
	return out, err
}

// ageInfo is what the structure of an age file tells without a key.
type ageInfo struct {
	recipients    int
	plaintextSize int
}

// Sizes in an age payload: the nonce, then STREAM chunks of ageChunk
// plaintext bytes each followed by an ageTag-byte tag.
const (
	ageChunk = 64 << 10
	ageTag   = 16
	ageNonce = 16
)

// inspectAge checks that body is an age file whose header parses in
// canonical form and whose payload length is one age can produce, and
// derives the plaintext size from it.
func inspectAge(body []byte, subj string) (ageInfo, error) {
	var ai ageInfo
	hdr, err := age.ExtractHeader(bytes.NewReader(body))
	if err != nil {
		return ai, refuse(subj, ErrFormat, "age header: %v", err)
	}
	// age re-serialises the header it parsed; any other spelling of the
	// same header is not what an age writer produces.
	if !bytes.HasPrefix(body, hdr) {
		return ai, refuse(subj, ErrFormat, "age header is not in canonical form")
	}
	ai.recipients = bytes.Count(hdr, []byte("\n-> "))
	payload := len(body) - len(hdr) - ageNonce
	if payload < 0 {
		return ai, refuse(subj, ErrFormat, "age payload is shorter than its nonce")
	}
	size, ok := agePlaintextSize(payload)
	if !ok {
		return ai, refuse(subj, ErrFormat, "age payload of %d bytes is not a whole number of chunks", payload)
	}
	switch {
	case size < innerFixed+1:
		return ai, refuse(subj, ErrFormat, "encrypted record of %d bytes is too short to be a signed record", size)
	case size > maxInner:
		return ai, refuse(subj, ErrTooLarge, "encrypted record is %d bytes, limit is %d", size, maxInner)
	}
	ai.plaintextSize = size
	return ai, nil
}

// agePlaintextSize returns the plaintext size of an age payload of n bytes
// after the nonce, and whether n is a length age can produce: full chunks,
// then one final chunk that is empty only if it is the only one.
func agePlaintextSize(n int) (int, bool) {
	if n < ageTag {
		return 0, false
	}
	chunks := (n + ageChunk + ageTag - 1) / (ageChunk + ageTag)
	size := n - chunks*ageTag
	want := (size + ageChunk - 1) / ageChunk
	if size == 0 {
		want = 1
	}
	return size, size >= 0 && want == chunks
}

// open decodes a sealed bundle. With expect nil any signer is accepted and
// returned.
func open(data []byte, c Context, identity age.Identity, expect ed25519.PublicKey) ([]byte, ed25519.PublicKey, error) {
	subj := subject(c)
	if identity == nil {
		return nil, nil, fmt.Errorf("%s: no identity to decrypt with", subj)
	}
	hl, err := parseHeaderLine(data, subj)
	if err != nil {
		return nil, nil, err
	}
	if hl.mode != Sealed {
		return nil, nil, refuse(subj, ErrMode, "bundle is %s, expected sealed", hl.mode)
	}
	body := data[hl.size:]
	ai, err := inspectAge(body, subj)
	if err != nil {
		return nil, nil, err
	}
	// DecryptReaderAt authenticates the final chunk, so the plaintext
	// size it returns is the one the writer produced.
	r, size, err := age.DecryptReaderAt(bytes.NewReader(body), int64(len(body)), identity)
	if err != nil {
		if nim := (*age.NoIdentityMatchError)(nil); errors.As(err, &nim) {
			return nil, nil, refuse(subj, ErrWrongRecipient, "no recipient stanza opens with this identity (stanzas: %d); it is encrypted to other keys, or damaged", ai.recipients)
		}
		return nil, nil, refuse(subj, ErrTampered, "%v", err)
	}
	if size != int64(ai.plaintextSize) {
		return nil, nil, refuse(subj, ErrFormat, "encrypted record is %d bytes, its ciphertext length implies %d", size, ai.plaintextSize)
	}
	// Decrypt straight behind the signed-message prefix so the signature
	// can be checked without another copy.
	prefix := signedPrefix(Sealed)
	msg := make([]byte, len(prefix)+ai.plaintextSize)
	copy(msg, prefix)
	n, err := r.ReadAt(msg[len(prefix):], 0)
	if err != nil && err != io.EOF {
		return nil, nil, refuse(subj, ErrTampered, "%v", err)
	}
	if n != ai.plaintextSize {
		return nil, nil, refuse(subj, ErrTampered, "decrypted %d of %d bytes", n, ai.plaintextSize)
	}
	return verify(msg, Sealed, c, expect, subj, true)
}

func openSigned(data []byte, c Context, expect ed25519.PublicKey, checkSignature bool) ([]byte, error) {
	subj := subject(c)
	hl, err := parseHeaderLine(data, subj)
	if err != nil {
		return nil, err
	}
	if hl.mode != Signed {
		return nil, refuse(subj, ErrMode, "bundle is %s, expected signed", hl.mode)
	}
	prefix := signedPrefix(Signed)
	msg := make([]byte, 0, len(prefix)+hl.bodyLen)
	msg = append(append(msg, prefix...), data[hl.size:]...)
	payload, _, err := verify(msg, Signed, c, expect, subj, checkSignature)
	return payload, err
}

// verify checks the signed record at the end of msg (which starts with the
// signed-message prefix for m): its structure, its signature (unless
// checkSignature is false, see ReopenSignedTOML), its signer against
// expect unless expect is nil, and its context against c. It returns the
// decompressed payload and the signer.
func verify(msg []byte, m Mode, c Context, expect ed25519.PublicKey, subj string, checkSignature bool) ([]byte, ed25519.PublicKey, error) {
	in, err := parseInner(msg[len(signedPrefix(m)):], subj)
	if err != nil {
		return nil, nil, err
	}
	if checkSignature && !ed25519.Verify(in.signer, msg[:len(msg)-ed25519.SignatureSize], in.signature) {
		return nil, nil, refuse(subj, ErrBadSignature, "not made by the key %x it names", []byte(in.signer))
	}
	if expect != nil && !bytes.Equal(in.signer, expect) {
		return nil, nil, refuse(subj, ErrUnexpectedSigner, "%x, expected %x", []byte(in.signer), []byte(expect))
	}
	for _, f := range [...]struct{ name, got, want string }{
		{"kind", in.ctx.Kind, c.Kind},
		{"node", in.ctx.Node, c.Node},
		{"name", in.ctx.Name, c.Name},
	} {
		if f.got != f.want {
			return nil, nil, refuse(subj, ErrContext, "%s is %q, expected %q", f.name, f.got, f.want)
		}
	}
	payload, err := decompress(in.payload, MaxPayload, subj)
	if err != nil {
		return nil, nil, err
	}
	return payload, bytes.Clone(in.signer), nil
}

func inspect(data []byte) (Header, error) {
	const subj = "bundle"
	hl, err := parseHeaderLine(data, subj)
	if err != nil {
		return Header{}, err
	}
	h := Header{Version: Version, Mode: hl.mode, Size: len(data), BodySize: hl.bodyLen}
	body := data[hl.size:]
	if hl.mode == Sealed {
		ai, err := inspectAge(body, subj)
		if err != nil {
			return Header{}, err
		}
		h.Recipients, h.SealedSize = ai.recipients, ai.plaintextSize
		return h, nil
	}
	in, err := parseInner(body, subj)
	if err != nil {
		return Header{}, err
	}
	prefix := signedPrefix(Signed)
	msg := make([]byte, 0, len(prefix)+len(body)-ed25519.SignatureSize)
	msg = append(append(msg, prefix...), body[:len(body)-ed25519.SignatureSize]...)
	if !ed25519.Verify(in.signer, msg, in.signature) {
		return Header{}, refuse(subj, ErrBadSignature, "not made by the key %x it names", []byte(in.signer))
	}
	fi, err := checkFrame(in.payload, MaxPayload, subj)
	if err != nil {
		return Header{}, err
	}
	h.Signer = bytes.Clone(in.signer)
	h.Context = in.ctx
	h.PayloadSize = len(in.payload)
	h.ContentSize = fi.contentSize
	return h, nil
}
