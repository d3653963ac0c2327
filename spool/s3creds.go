package spool

import (
	"cmp"
	"os"
	"path/filepath"
	"strings"
)

// s3Credentials are the keys requests are signed with. Without an access
// key and a secret requests go unsigned (anonymous), which a store allows
// only for a public bucket.
type s3Credentials struct {
	AccessKey, SecretKey, SessionToken string
}

func (c s3Credentials) anonymous() bool { return c.AccessKey == "" || c.SecretKey == "" }

// findCredentials looks for credentials where S3Config says, in order:
// the configuration itself, the AWS environment variables, the shared
// credentials file. It reads files only, never runs a program or asks a
// server, and finding nothing is no error: the requests go anonymous and
// a refusal's hint says no credentials were found.
func findCredentials(cfg S3Config) s3Credentials {
	if cfg.AccessKey != "" {
		return s3Credentials{cfg.AccessKey, cfg.SecretKey, cfg.SessionToken}
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" {
		return s3Credentials{id, secret, os.Getenv("AWS_SESSION_TOKEN")}
	}
	file := os.Getenv("AWS_SHARED_CREDENTIALS_FILE")
	if file == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return s3Credentials{}
		}
		file = filepath.Join(home, ".aws", "credentials")
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return s3Credentials{}
	}
	return parseCredentialsFile(string(data), cmp.Or(os.Getenv("AWS_PROFILE"), "default"))
}

// parseCredentialsFile reads profile's keys from a shared credentials
// file, the INI file the AWS tools write:
//
//	[default]
//	aws_access_key_id = AKIA...
//	aws_secret_access_key = ...
//	aws_session_token = ...   ; optional
//
// Lines starting with # or ; are comments, and so is the rest of a line
// from a # or ; that follows a blank. Key names are case-insensitive; a
// profile named twice is one profile, later keys winning. Keys of other
// profiles, and settings other than the three above, are ignored.
func parseCredentialsFile(data, profile string) s3Credentials {
	var c s3Credentials
	in := false
	for line := range strings.Lines(strings.TrimPrefix(data, "\uFEFF")) {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' {
			continue
		}
		if line[0] == '[' {
			end := strings.IndexByte(line, ']')
			in = end > 0 && strings.TrimSpace(line[1:end]) == profile
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if !in || !ok {
			continue
		}
		for i := 1; i < len(value); i++ {
			if (value[i] == '#' || value[i] == ';') && (value[i-1] == ' ' || value[i-1] == '\t') {
				value = value[:i]
				break
			}
		}
		value = strings.TrimSpace(value)
		switch strings.ToLower(strings.TrimSpace(key)) {
		case "aws_access_key_id":
			c.AccessKey = value
		case "aws_secret_access_key":
			c.SecretKey = value
		case "aws_session_token":
			c.SessionToken = value
		}
	}
	return c
}
