package curve

import (
	"errors"
	"strings"

	"filippo.io/age"
)

// AgePoint returns the Curve25519 u-coordinate that r is the text form of:
// age keeps it unexported, and sealing computes with it (see Recipients),
// as vetting a key checks it (see internal/keys).
func AgePoint(r *age.X25519Recipient) ([]byte, error) {
	return decode(r.String(), "age")
}

// decode decodes the Bech32 encoding (BIP 173, without its length
// limit) that age uses for its keys, and returns the 32-byte key if the
// human-readable part is hrp.
func decode(s, hrp string) ([]byte, error) {
	if strings.ToLower(s) != s && strings.ToUpper(s) != s {
		return nil, errors.New("mixed case")
	}
	s = strings.ToLower(s)
	sep := strings.LastIndexByte(s, '1')
	if sep < 1 || sep+7 > len(s) || s[:sep] != hrp {
		return nil, errors.New("not a " + hrp + " key")
	}
	const charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"
	data := make([]byte, 0, len(s)-sep-1)
	for _, c := range s[sep+1:] {
		v := strings.IndexRune(charset, c)
		if v < 0 {
			return nil, errors.New("invalid character")
		}
		data = append(data, byte(v))
	}
	if bech32Checksum(hrp, data) != 1 {
		return nil, errors.New("bad checksum")
	}
	data = data[:len(data)-6]
	var out []byte
	var acc, bits uint
	for _, v := range data {
		acc = acc<<5 | uint(v)
		bits += 5
		for bits >= 8 {
			bits -= 8
			out = append(out, byte(acc>>bits))
		}
	}
	if bits >= 5 || acc&(1<<bits-1) != 0 {
		return nil, errors.New("bad padding")
	}
	if len(out) != 32 {
		return nil, errors.New("not a 32-byte key")
	}
	return out, nil
}

func bech32Checksum(hrp string, data []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	step := func(v byte) {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if top>>i&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	for i := range len(hrp) {
		step(hrp[i] >> 5)
	}
	step(0)
	for i := range len(hrp) {
		step(hrp[i] & 31)
	}
	for _, v := range data {
		step(v)
	}
	return chk
}
