package apply

import (
	"fmt"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
	"github.com/muster-tool/muster/internal/resource"
)

// checkDeclaration holds a fetched declaration to the rules declare holds
// it to (resource.Validate), whole, before anything on the host changes. A
// correctly signed declaration that declare would have refused was made
// some other way: by a bug, another version of muster or a compromised
// pipeline. It is refused whole, naming the first entry at fault, rather
// than applied line by line.
func checkDeclaration(gen uint64, nd *generation.NodeDeclaration) error {
	err := resource.Validate(nd.Resources)
	if err == nil {
		// The recovery copy names paths the host may remove as orphans.
		for i, e := range nd.Recovery {
			s := e.Spec()
			if bad := resource.Check(&s); len(bad) > 0 {
				err = fmt.Errorf("recovery copy entry %d of %d, %s: %v", i+1, len(nd.Recovery), resource.ShownID(&s), bad[0])
				break
			}
		}
	}
	if err == nil {
		return nil
	}
	return fault.WithHint(fault.Refusedf("declaration of generation %d refused, nothing was changed: %w", gen, err),
		"muster declare refuses such a declaration, so it was made some other way; find out how, and declare a new generation with muster declare")
}
