package generation

import (
	"testing"

	"github.com/muster-tool/muster/internal/ledger"
	"github.com/muster-tool/muster/internal/resource"
)

// A host that owns a symlink sends it in its recovery copy without its
// target (a ledger keeps none); the declarations that carry the copy back
// must not be refused for it.
func TestValidateRecoveryCopyWithSymlink(t *testing.T) {
	nd := &NodeDeclaration{Recovery: []ledger.Entry{{ID: "symlink:/etc/labd/current.conf", Kind: resource.Symlink, Path: "/etc/labd/current.conf"}}}
	if err := nd.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
}
