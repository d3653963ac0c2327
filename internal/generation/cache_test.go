package generation

import (
	"reflect"
	"testing"

	"github.com/muster-tool/muster/internal/testutil/fill"
)

func TestCacheCodecCoversEveryField(t *testing.T) {
	var nd NodeDeclaration
	fill.Value(reflect.ValueOf(&nd).Elem())
	f := false
	nd.Resources[1].Running = &f // nil, false and true all travel
	nd.Resources[1].Enabled = nil
	got, err := DecodeCache(string(nd.EncodeCache()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &nd) {
		t.Fatalf("round trip differs:\n got %+v\nwant %+v", got, &nd)
	}
}

func TestCacheCodecRefusesDamage(t *testing.T) {
	var nd NodeDeclaration
	fill.Value(reflect.ValueOf(&nd).Elem())
	b := nd.EncodeCache()
	for i := range len(b) {
		if _, err := DecodeCache(string(b[:i])); err == nil {
			t.Fatalf("a cache cut to %d of %d bytes decoded", i, len(b))
		}
	}
	if _, err := DecodeCache(string(append(b, 0))); err == nil {
		t.Fatal("a cache with a trailing byte decoded")
	}
	// A huge length is refused, not allocated.
	if _, err := DecodeCache(string([]byte{0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})); err == nil {
		t.Fatal("a cache with an impossible length decoded")
	}
}
