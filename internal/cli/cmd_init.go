package cli

import (
	"fmt"

	"github.com/muster-tool/muster/internal/fault"
	"github.com/muster-tool/muster/internal/mesh"
)

func cmdInit() *Command {
	return &Command{
		Name:  "init",
		Usage: "muster init --mesh DIR --spool SPOOL",
		Short: "create the mesh key and publish it in a new spool",
		Long: `Create the mesh key in DIR: an age X25519 identity (mesh.age: reports and join
requests are encrypted to it) and an ed25519 signing key (mesh.sign: it signs
declarations), each created with mode 0600 in a 0700 directory, plus mesh.toml
naming the spool. init never overwrites a key: if DIR already holds one it
stops. An existing DIR that the group or others can enter is refused with the
chmod that fixes it, as every command that loads the key refuses a key file or
directory others can reach. It publishes the mesh's public keys in the spool as
mesh/keys, refusing a spool that already belongs to a mesh, and prints the
public keys. If anything fails, nothing is left behind.`,
		Examples: `# a mesh with a directory spool
mkdir -p /srv/muster/spool
muster init --mesh ~/.config/muster/mesh --spool /srv/muster/spool`,
		Global: []string{"mesh", "spool"},
		Exits:  []int{ExitFailure, ExitUsage, ExitRefused, ExitTemporary},
		Run:    runInit,
	}
}

// runInit creates the mesh key in --mesh and publishes its public keys in
// the new spool --spool.
func runInit(env *Env, args []string) error {
	if err := needArgs(args, 0, 0, ""); err != nil {
		return err
	}
	if env.Global.Spool == "" {
		return fault.Usagef("no spool given: pass --spool SPOOL or set MUSTER_SPOOL")
	}
	m, err := mesh.Init(env.Ctx, env.Global.Mesh, env.Global.Spool, env.Now())
	if err != nil {
		return err
	}
	pub := m.Public()
	fmt.Fprintf(env.Stdio.Out, "mesh created in %s\nspool: %s\nage public key: %s\nsigning public key: %s\nfingerprint: %s\n",
		m.Dir, m.Spool, pub.Age, pub.Sign, pub.Fingerprint())
	return nil
}
