package apply

import (
	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/generation"
)

// checkDeclaration holds a fetched declaration to the rules declare holds
// it to (NodeDeclaration.Validate), whole, before anything on the host
// changes. A correctly signed declaration that declare would have refused
// was made some other way: by a bug, another version of muster or a
// compromised pipeline. It is refused whole, naming the first entry at
// fault, rather than applied line by line.
func checkDeclaration(gen uint64, nd *generation.NodeDeclaration) error {
	if err := nd.Validate(); err != nil {
		return fault.WithHint(fault.Refusedf("declaration of generation %d refused, nothing was changed: %w", gen, err),
			"muster declare refuses such a declaration, so it was made some other way; find out how, and declare a new generation with muster declare")
	}
	return nil
}
