package spool

import "fmt"

// EnrolRefusedPrefix holds the refusals of join requests, so each request
// is decided once.
const EnrolRefusedPrefix = "enrol/refused/"

// RefusedName names the refusal of the join request made with token
// tokenID by the host with fingerprint hostFP.
func RefusedName(tokenID, hostFP string) string {
	return EnrolRefusedPrefix + tokenID + "/" + hostFP
}

// ManifestPrefix holds each declare run's manifest (sealed to the mesh).
const ManifestPrefix = "manifest/"

// ManifestName names the manifest of declare run runID for generation gen.
func ManifestName(gen uint64, runID string) string {
	return ManifestPrefix + GenerationName(gen) + "/" + runID
}

// ParseManifestName splits a manifest's name into its generation and run.
func ParseManifestName(name string) (gen uint64, runID string, err error) {
	parts, ok := splitUnder(name, ManifestPrefix, 2)
	if !ok {
		return 0, "", fmt.Errorf("object %s is not a manifest (want %s<generation>/<runid>)", name, ManifestPrefix)
	}
	if gen, err = ParseGeneration(parts[0]); err != nil {
		return 0, "", fmt.Errorf("object %s: %w", name, err)
	}
	return gen, parts[1], nil
}
