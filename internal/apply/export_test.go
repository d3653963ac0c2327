package apply

// For the black-box tests: the fingerprints file's name and codec.
var (
	EncodeFingerprints = encodeFingerprints
	DecodeFingerprints = decodeFingerprints
)

const FingerprintFile = fingerprintFile
