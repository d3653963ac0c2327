package spool

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
