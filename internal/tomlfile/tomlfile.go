// Package tomlfile owns how muster reads TOML from outside and writes its
// own local TOML files (mesh.toml, the host config, pinned keys, host
// state, the launcher's rollback note). Every TOML muster reads, these
// files, declarations and bundle payloads alike, reaches the TOML library
// through DecodeMeta, after Check has held it to the caps on nesting and
// size. Decode reads strictly, so that a mistyped key is an error naming
// it rather than a setting silently ignored, and a syntax error names its
// line.
package tomlfile

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/BurntSushi/toml"
)

// SyntaxError is a TOML syntax error at a line.
type SyntaxError struct {
	Line int
	Msg  string
}

func (e *SyntaxError) Error() string     { return atLineText(e) }
func (e *SyntaxError) at() (int, string) { return e.Line, e.Msg }

// atLine is an error about one line of a document (0: the line is not
// known), as each error of this package's is: Error says "line N: what",
// and In "FILE:N: what".
type atLine interface {
	error
	at() (line int, what string)
}

func atLineText(e atLine) string {
	line, what := e.at()
	if line > 0 {
		return fmt.Sprintf("line %d: %s", line, what)
	}
	return what
}

// KeyError is a key a document defines that the reader has no place for,
// at the line defining it (0 when the line is not known).
type KeyError struct {
	Line int
	Key  string
}

func (e *KeyError) Error() string     { return atLineText(e) }
func (e *KeyError) at() (int, string) { return e.Line, e.Key + ": unknown key" }

// DecodeMeta checks data against the caps (a *CapError when over one),
// then decodes it into v with the TOML library and returns the library's
// metadata and errors as they are. When ctx ends first it returns ctx's
// error at once and leaves the library to finish on its own: v must then
// not be used.
func DecodeMeta(ctx context.Context, data []byte, v any) (toml.MetaData, error) {
	if err := Check(ctx, data); err != nil {
		return toml.MetaData{}, err
	}
	if ctx.Done() == nil {
		return toml.Decode(string(data), v)
	}
	type decoded struct {
		md  toml.MetaData
		err error
	}
	done := make(chan decoded, 1)
	go func() {
		md, err := toml.Decode(string(data), v)
		done <- decoded{md, err}
	}()
	select {
	case d := <-done:
		return d.md, d.err
	case <-ctx.Done():
		return toml.MetaData{}, ctx.Err()
	}
}

// Decode decodes data into v. A syntax error is a *SyntaxError, a
// document over a cap a *CapError, a key v has no place for a *KeyError,
// and a value of a type v has no place for a *TypeError.
func Decode(data []byte, v any) error {
	md, err := DecodeMeta(context.Background(), data, v)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return &SyntaxError{Line: pe.Position.Line, Msg: pe.Message}
		}
		var ce *CapError
		if !errors.As(err, &ce) {
			if te := typeError(data, v); te != nil {
				return te
			}
		}
		return err
	}
	if und := md.Undecoded(); len(und) > 0 {
		return &KeyError{Line: LocateKeys(string(data)).Line(und[0]...), Key: und[0].String()}
	}
	return nil
}

// ReadFile reads a TOML file, refusing one over the size cap before
// reading it. Errors from the file system come back as os.ReadFile gives
// them, so errors.Is(err, fs.ErrNotExist) still tells a missing file.
func ReadFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > MaxSize {
		return nil, sizeError(fi.Size())
	}
	return ReadAll(f)
}

// ReadAll reads a TOML document from r, refusing one over the size cap
// as soon as it has read a byte past it.
func ReadAll(r io.Reader) ([]byte, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxSize {
		return nil, sizeError(-1)
	}
	return data, nil
}

// In names the file an error from ReadFile or Decode is about, in the
// house style: "FILE:LINE: message" for an error about a line (a syntax
// error, a cap crossed, a key unknown, a value of the wrong type), "FILE:
// message" otherwise. An error from the file system, which names the file
// already, and nil stay as they are.
func In(path string, err error) error {
	var pe *fs.PathError
	if err == nil || errors.As(err, &pe) {
		return err
	}
	var le atLine
	if errors.As(err, &le) {
		if line, what := le.at(); line > 0 {
			return fmt.Errorf("%s:%d: %s", path, line, what)
		}
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
