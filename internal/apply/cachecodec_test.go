package apply

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/muster-tool/muster/internal/generation"
)

// fill sets every field reachable from v to a value that differs from its
// zero value and from the other fields, so a field the codec forgets shows
// up as a difference.
func fill(v reflect.Value, n *int) {
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
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem(), n)
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[time.Time]() {
			v.Set(reflect.ValueOf(time.Date(2026, 11, 12, 9, 14, 0, *n, time.UTC)))
			return
		}
		for i := range v.NumField() {
			fill(v.Field(i), n)
		}
	default:
		panic("cache codec test: no filler for " + v.Type().String())
	}
}

func TestCacheCodecCoversEveryField(t *testing.T) {
	var nd generation.NodeDeclaration
	n := 0
	fill(reflect.ValueOf(&nd).Elem(), &n)
	f := false
	nd.Resources[1].Running = &f // nil, false and true all travel
	nd.Resources[1].Enabled = nil
	got, err := decodeCachedDeclaration(string(encodeCachedDeclaration(&nd)))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &nd) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, &nd)
	}
}

func TestCacheCodecRefusesDamage(t *testing.T) {
	var nd generation.NodeDeclaration
	n := 0
	fill(reflect.ValueOf(&nd).Elem(), &n)
	b := encodeCachedDeclaration(&nd)
	for i := range len(b) {
		if _, err := decodeCachedDeclaration(string(b[:i])); err == nil {
			t.Fatalf("a cache cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := decodeCachedDeclaration(string(append(b, 0))); err == nil {
		t.Fatal("a cache with a trailing byte decoded")
	}
	// A huge length is refused, not allocated.
	if _, err := decodeCachedDeclaration(string([]byte{0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})); err == nil {
		t.Fatal("a cache with an impossible length decoded")
	}
}
