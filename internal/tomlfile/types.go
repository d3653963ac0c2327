package tomlfile

import (
	"encoding"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// TypeError is a value a document gives where the reader wants another
// type, at the line defining its key (0 when the line is not known).
type TypeError struct {
	Line      int
	Key       string
	Want, Got string // "a string", "an integer", ...
}

func (e *TypeError) Error() string { return atLineText(e) }
func (e *TypeError) at() (int, string) {
	return e.Line, fmt.Sprintf("%s: must be %s, not %s", e.Key, e.Want, e.Got)
}

// typeError finds, in data that decoded into v with an error that was no
// syntax error, the first value (by line) whose type v has no place for.
// The TOML library names types as Go does and puts the key in a note of
// its own; this names them as TOML does, at the key's line. It returns
// nil when it finds none, and the library's error stands.
func typeError(data []byte, v any) *TypeError {
	var doc map[string]any
	if _, err := toml.Decode(string(data), &doc); err != nil {
		return nil
	}
	lines := LocateKeys(string(data))
	var found *TypeError
	var walk func(t reflect.Type, val any, key []string)
	walk = func(t reflect.Type, val any, key []string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if want, ok := wantType(t, val); !ok {
			line := lines.Line(key...)
			if found == nil || line > 0 && (found.Line == 0 || line < found.Line) {
				found = &TypeError{Line: line, Key: toml.Key(key).String(), Want: want, Got: TypeName(val)}
			}
			return
		}
		switch t.Kind() {
		case reflect.Struct:
			if t == timeType {
				return
			}
			m := val.(map[string]any)
			for k, fv := range m {
				if f, ok := fieldFor(t, k); ok {
					walk(f.Type, fv, append(slices.Clip(key), k))
				}
			}
		case reflect.Map:
			for k, fv := range val.(map[string]any) {
				walk(t.Elem(), fv, append(slices.Clip(key), k))
			}
		case reflect.Slice, reflect.Array:
			switch l := val.(type) {
			case []any:
				for _, e := range l {
					walk(t.Elem(), e, key)
				}
			case []map[string]any:
				for _, e := range l {
					walk(t.Elem(), e, key)
				}
			}
		}
	}
	walk(reflect.TypeOf(v), doc, nil)
	return found
}

var (
	timeType          = reflect.TypeFor[time.Time]()
	primitiveType     = reflect.TypeFor[toml.Primitive]()
	textUnmarshaler   = reflect.TypeFor[encoding.TextUnmarshaler]()
	tomlUnmarshaler   = reflect.TypeFor[toml.Unmarshaler]()
	primitiveDecoders = []reflect.Type{textUnmarshaler, tomlUnmarshaler}
)

// wantType says what TOML type t takes, and whether val is of it.
func wantType(t reflect.Type, val any) (string, bool) {
	for _, u := range primitiveDecoders {
		if reflect.PointerTo(t).Implements(u) && t != timeType {
			if u == tomlUnmarshaler {
				return "", true // decodes what it likes
			}
			_, ok := val.(string)
			return "a string", ok
		}
	}
	if t == primitiveType {
		return "", true // decoded later, as what it holds
	}
	switch t.Kind() {
	case reflect.Interface:
		return "", true
	case reflect.String:
		_, ok := val.(string)
		return "a string", ok
	case reflect.Bool:
		_, ok := val.(bool)
		return "a boolean", ok
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		_, ok := val.(int64)
		return "an integer", ok
	case reflect.Float32, reflect.Float64:
		switch val.(type) {
		case float64, int64:
			return "a number", true
		}
		return "a number", false
	case reflect.Slice, reflect.Array:
		switch val.(type) {
		case []any, []map[string]any:
			return "an array", true
		}
		return "an array", false
	case reflect.Struct:
		if t == timeType {
			_, ok := val.(time.Time)
			return "a date-time", ok
		}
		_, ok := val.(map[string]any)
		return "a table", ok
	case reflect.Map:
		_, ok := val.(map[string]any)
		return "a table", ok
	}
	return "", true
}

// fieldFor is the field of struct t that key k decodes into, as the TOML
// library matches them: by tag, else by name, else by name in any case.
func fieldFor(t reflect.Type, k string) (reflect.StructField, bool) {
	var fold reflect.StructField
	folded := false
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if name == k {
			return f, true
		}
		if !folded && strings.EqualFold(name, k) {
			fold, folded = f, true
		}
	}
	return fold, folded
}

// TypeName names a decoded TOML value's type for messages, as "a string"
// or "an array of tables".
func TypeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []map[string]any:
		return "an array of tables"
	case []any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return "an unsupported value"
}
