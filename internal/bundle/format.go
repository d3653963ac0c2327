package bundle

import (
	"bytes"
	"crypto/ed25519"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits of the format. muster-bundle(5) states the same numbers; a change
// here is a change of the format.
const (
	// Version is the format version this package writes and reads.
	Version = 1
	// MaxPayload bounds the uncompressed payload, on encode and decode.
	MaxPayload = 64 << 20
	// MaxCompressed bounds the compressed payload: MaxPayload plus room for
	// zstd's framing of incompressible data.
	MaxCompressed = MaxPayload + 64<<10
	// MaxWindow bounds the zstd window of a frame that is not single-segment.
	MaxWindow = 8 << 20
	// MaxBody bounds the bytes after the header line, so a reader can refuse
	// an oversized object before reading it.
	MaxBody = 96 << 20
	// MaxContextField bounds each of the context's Kind, Node and Name.
	MaxContextField = 1024
)

const (
	headerPrefix = "muster-bundle/"
	// headerMax bounds the header line, newline included.
	headerMax = 64
	// signatureDomain starts every signed message; it keeps a bundle
	// signature from being valid for anything else the same key signs.
	signatureDomain = "muster-bundle/v1 signature"
	innerVersion    = 1
	// innerFixed is the size of an inner record's fixed-size fields: the
	// version, the signer key, three context lengths, the payload length and
	// the signature.
	innerFixed = 1 + ed25519.PublicKeySize + 3*2 + 4 + ed25519.SignatureSize
	maxInner   = innerFixed + 3*MaxContextField + MaxCompressed
)

// Mode says whether a bundle is encrypted.
type Mode uint8

const (
	// Sealed bundles are signed, then encrypted with age to their readers.
	Sealed Mode = 1
	// Signed bundles are signed only: for public records.
	Signed Mode = 2
)

func (m Mode) String() string {
	switch m {
	case Sealed:
		return "sealed"
	case Signed:
		return "signed"
	}
	return "mode(" + strconv.Itoa(int(m)) + ")"
}

// appendHeaderLine appends the plain-text first line of a bundle.
func appendHeaderLine(dst []byte, m Mode, bodyLen int) []byte {
	dst = append(dst, headerPrefix+"v1 "...)
	dst = append(dst, m.String()...)
	dst = append(dst, ' ')
	dst = strconv.AppendInt(dst, int64(bodyLen), 10)
	return append(dst, '\n')
}

// headerLine is a parsed first line.
type headerLine struct {
	mode    Mode
	bodyLen int
	size    int // length of the line, newline included
}

// parseHeaderLine parses the first line of data and checks that exactly the
// body length it declares follows it. subj names the object in errors.
func parseHeaderLine(data []byte, subj string) (headerLine, error) {
	head := data[:min(len(data), headerMax)]
	nl := bytes.IndexByte(head, '\n')
	if nl < 0 {
		// A short prefix of a valid header is a truncated bundle; anything
		// else is not a bundle at all.
		looksLike := bytes.HasPrefix(head, []byte(headerPrefix)) || bytes.HasPrefix([]byte(headerPrefix), head)
		switch {
		case looksLike && len(data) < headerMax:
			return headerLine{}, refuse(subj, ErrTruncated, "header line is incomplete (%d bytes)", len(data))
		case looksLike:
			return headerLine{}, refuse(subj, ErrFormat, "header line is longer than %d bytes", headerMax)
		}
		return headerLine{}, refuse(subj, ErrFormat, "not a muster bundle")
	}
	line := head[:nl]
	if !bytes.HasPrefix(line, []byte(headerPrefix)) {
		return headerLine{}, refuse(subj, ErrFormat, "not a muster bundle (header line %q)", line)
	}
	fields := bytes.Split(line[len(headerPrefix):], []byte{' '})
	ver := fields[0]
	if len(ver) < 2 || ver[0] != 'v' || !isDecimal(ver[1:]) {
		return headerLine{}, refuse(subj, ErrFormat, "bad version in header line %q", line)
	}
	if string(ver) != "v1" {
		return headerLine{}, refuse(subj, ErrVersion, "%s (this muster reads v1)", ver)
	}
	if len(fields) != 3 {
		return headerLine{}, refuse(subj, ErrFormat, "header line %q does not have three fields", line)
	}
	var h headerLine
	switch string(fields[1]) {
	case "sealed":
		h.mode = Sealed
	case "signed":
		h.mode = Signed
	default:
		return headerLine{}, refuse(subj, ErrFormat, "unknown mode %q in header line", fields[1])
	}
	n := fields[2]
	if !isDecimal(n) || len(n) > 10 || (len(n) > 1 && n[0] == '0') {
		return headerLine{}, refuse(subj, ErrFormat, "bad body length %q in header line", n)
	}
	bodyLen, _ := strconv.Atoi(string(n))
	if bodyLen > MaxBody {
		return headerLine{}, refuse(subj, ErrTooLarge, "header declares %d body bytes, limit is %d", bodyLen, MaxBody)
	}
	h.bodyLen = bodyLen
	h.size = nl + 1
	switch have := len(data) - h.size; {
	case have < bodyLen:
		return headerLine{}, refuse(subj, ErrTruncated, "header declares %d body bytes, %d present", bodyLen, have)
	case have > bodyLen:
		return headerLine{}, refuse(subj, ErrTrailing, "header declares %d body bytes, %d present", bodyLen, have)
	}
	return h, nil
}

func isDecimal(b []byte) bool {
	if len(b) == 0 {
		return false
	}
	for _, c := range b {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// checkContext refuses context fields a bundle may not carry: they must be
// bounded and printable in an error message.
func checkContext(c Context) error {
	if c.Kind == "" {
		return errors.New("context has no kind")
	}
	for _, f := range [...]struct{ name, v string }{{"kind", c.Kind}, {"node", c.Node}, {"name", c.Name}} {
		if len(f.v) > MaxContextField {
			return fmt.Errorf("context %s is %d bytes, limit is %d", f.name, len(f.v), MaxContextField)
		}
		if !utf8.ValidString(f.v) {
			return fmt.Errorf("context %s is not valid UTF-8", f.name)
		}
		if strings.ContainsFunc(f.v, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return fmt.Errorf("context %s holds a control character", f.name)
		}
	}
	return nil
}

// signedPrefix is what precedes the inner record, minus its signature, in
// the message ed25519 signs: the domain and the mode, each ended by NUL.
func signedPrefix(m Mode) string {
	return signatureDomain + "\x00" + m.String() + "\x00"
}

// appendInnerHead appends an inner record's fields before the payload:
// version, signer key and context. The payload length follows it.
func appendInnerHead(dst []byte, signer ed25519.PublicKey, c Context) []byte {
	dst = append(dst, innerVersion)
	dst = append(dst, signer...)
	for _, f := range [...]string{c.Kind, c.Node, c.Name} {
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(f)))
		dst = append(dst, f...)
	}
	return dst
}

// inner is a parsed inner record. Its slices alias the record.
type inner struct {
	signer    ed25519.PublicKey
	ctx       Context
	payload   []byte // one zstd frame
	signature []byte
}

// parseInner parses an inner record; rec must be exactly one record.
func parseInner(rec []byte, subj string) (inner, error) {
	var in inner
	if len(rec) == 0 {
		return in, refuse(subj, ErrTruncated, "signed record is empty")
	}
	if rec[0] != innerVersion {
		return in, refuse(subj, ErrVersion, "signed record has version %d (this muster reads 1)", rec[0])
	}
	p := rec[1:]
	short := func(what string) error {
		return refuse(subj, ErrTruncated, "signed record ends inside its %s", what)
	}
	if len(p) < ed25519.PublicKeySize {
		return in, short("signer key")
	}
	in.signer, p = ed25519.PublicKey(p[:ed25519.PublicKeySize:ed25519.PublicKeySize]), p[ed25519.PublicKeySize:]
	var fields [3]string
	for i, name := range [...]string{"kind", "node", "name"} {
		if len(p) < 2 {
			return in, short("context " + name + " length")
		}
		n := int(binary.BigEndian.Uint16(p))
		p = p[2:]
		if n > MaxContextField {
			return in, refuse(subj, ErrFormat, "context %s is %d bytes, limit is %d", name, n, MaxContextField)
		}
		if len(p) < n {
			return in, short("context " + name)
		}
		fields[i], p = string(p[:n]), p[n:]
	}
	in.ctx = Context{Kind: fields[0], Node: fields[1], Name: fields[2]}
	if err := checkContext(in.ctx); err != nil {
		return in, refuse(subj, ErrFormat, "%v", err)
	}
	if len(p) < 4 {
		return in, short("payload length")
	}
	n := binary.BigEndian.Uint32(p)
	p = p[4:]
	if n > MaxCompressed {
		return in, refuse(subj, ErrTooLarge, "compressed payload is %d bytes, limit is %d", n, MaxCompressed)
	}
	if uint32(len(p)) < n {
		return in, short("payload")
	}
	in.payload, p = p[:n:n], p[n:]
	switch {
	case len(p) < ed25519.SignatureSize:
		return in, short("signature")
	case len(p) > ed25519.SignatureSize:
		return in, refuse(subj, ErrTrailing, "signed record continues %d bytes past its signature", len(p)-ed25519.SignatureSize)
	}
	in.signature = p
	return in, nil
}
