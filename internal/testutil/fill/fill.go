// Package fill sets every field reachable from a value to something that
// differs from its zero value and from every other field, for tests of
// hand-written codecs that must carry every field: a field a codec forgets
// shows up as a difference after a round trip.
package fill

import (
	"fmt"
	"reflect"
	"time"
)

// Value fills v, which must be settable. Slices and maps get two elements,
// pointers a new value; uint64s are large enough to take several varint
// bytes. It panics on a kind it has no filler for, so a new kind of field
// is noticed.
func Value(v reflect.Value) {
	n := 0
	value(v, &n)
}

func value(v reflect.Value, n *int) {
	*n++
	switch v.Kind() {
	case reflect.String:
		v.SetString(fmt.Sprintf("s%d\x00\n\"é", *n))
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(-int64(*n) * 1000003)
	case reflect.Uint64:
		v.SetUint(uint64(*n) << 40)
	case reflect.Uint32, reflect.Uint8:
		v.SetUint(uint64(*n) % (1 << v.Type().Bits()))
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		value(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			value(v.Index(i), n)
		}
	case reflect.Array:
		for i := range v.Len() {
			value(v.Index(i), n)
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		for range 2 {
			k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
			value(k, n)
			value(e, n)
			v.SetMapIndex(k, e)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 12, 9, 14, 0, *n, time.UTC)))
			return
		}
		for i := range v.NumField() {
			value(v.Field(i), n)
		}
	default:
		panic("fill: no filler for " + v.Type().String())
	}
}
