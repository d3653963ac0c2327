// Package tomlfile owns how muster reads and writes its own local TOML
// files (mesh.toml, the host config, pinned keys, host state, the
// launcher's rollback note): strictly, so that a mistyped key is an error
// naming it rather than a setting silently ignored, and with a syntax error
// naming its line.
package tomlfile

import (
	"bytes"
	"errors"
	"fmt"

	"github.com/BurntSushi/toml"
)

// SyntaxError is a TOML syntax error at a line.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("line %d: %s", e.Line, e.Msg) }

// Decode decodes data into v. A syntax error is a *SyntaxError; a key v
// has no place for is an error naming the key.
func Decode(data []byte, v any) error {
	md, err := toml.Decode(string(data), v)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return &SyntaxError{Line: pe.Position.Line, Msg: pe.Message}
		}
		return err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return fmt.Errorf("unknown key %q", und[0].String())
	}
	return nil
}

// In names the file an error from Decode is about, in the house style:
// "FILE:LINE: message" for a syntax error, "FILE: message" otherwise;
// nil stays nil.
func In(path string, err error) error {
	if err == nil {
		return nil
	}
	var se *SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("%s:%d: %s", path, se.Line, se.Msg)
	}
	return fmt.Errorf("%s: %w", path, err)
}

// Encode renders v as TOML after header, a comment line ("# ...") or "".
func Encode(header string, v any) ([]byte, error) {
	var buf bytes.Buffer
	if header != "" {
		buf.WriteString(header)
		buf.WriteByte('\n')
	}
	if err := toml.NewEncoder(&buf).Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
