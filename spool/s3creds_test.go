package spool

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParseCredentialsFile(t *testing.T) {
	const file = "\uFEFF# written by aws configure\r\n" +
		"[default]\r\n" +
		"aws_access_key_id = DEFAULTKEY\r\n" +
		"aws_secret_access_key = default/secret+key=\r\n" +
		"\n" +
		"; another profile\n" +
		"[ muster ]\n" +
		"AWS_Access_Key_ID=MUSTERKEY   # inline comment\n" +
		"aws_secret_access_key\t=\tmuster#secret ; inline comment\n" +
		"aws_session_token = token==\n" +
		"region = eu-west-1\n" +
		"s3 =\n" +
		"    max_concurrent_requests = 20\n" +
		"[partial]\n" +
		"aws_access_key_id = ONLYKEY\n" +
		"[twice]\n" +
		"aws_access_key_id = FIRST\n" +
		"aws_secret_access_key = first\n" +
		"[other]\n" +
		"aws_secret_access_key = notmine\n" +
		"[twice]\n" +
		"aws_access_key_id = SECOND\n"
	for _, tc := range []struct {
		profile string
		want    s3Credentials
		anon    bool
	}{
		{"default", s3Credentials{"DEFAULTKEY", "default/secret+key=", ""}, false},
		{"muster", s3Credentials{"MUSTERKEY", "muster#secret", "token=="}, false},
		{"partial", s3Credentials{AccessKey: "ONLYKEY"}, true},
		{"twice", s3Credentials{"SECOND", "first", ""}, false},
		{"missing", s3Credentials{}, true},
		{"default ", s3Credentials{}, true},
	} {
		got := parseCredentialsFile(file, tc.profile)
		if got != tc.want || got.anonymous() != tc.anon {
			t.Errorf("profile %q: %+v (anonymous %v), want %+v (anonymous %v)", tc.profile, got, got.anonymous(), tc.want, tc.anon)
		}
	}
}

// TestFindCredentials checks the order of the sources: the configuration,
// the environment, the shared credentials file, else none.
func TestFindCredentials(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "credentials")
	if err := os.WriteFile(file, []byte("[default]\naws_access_key_id=FILEKEY\naws_secret_access_key=filesecret\n[ops]\naws_access_key_id=OPSKEY\naws_secret_access_key=opssecret\naws_session_token=opstoken\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HOME", dir) // no ~/.aws of the machine's
	t.Setenv("AWS_ACCESS_KEY_ID", "ENVKEY")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "envsecret")
	t.Setenv("AWS_SESSION_TOKEN", "envtoken")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	t.Setenv("AWS_PROFILE", "")

	check := func(what string, cfg S3Config, want s3Credentials) {
		t.Helper()
		if got := findCredentials(cfg); got != want {
			t.Errorf("%s: %+v, want %+v", what, got, want)
		}
	}
	check("explicit keys", S3Config{AccessKey: "CFGKEY", SecretKey: "cfgsecret"}, s3Credentials{"CFGKEY", "cfgsecret", ""})
	check("environment", S3Config{}, s3Credentials{"ENVKEY", "envsecret", "envtoken"})
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	check("half the environment: the file", S3Config{}, s3Credentials{"FILEKEY", "filesecret", ""})
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_PROFILE", "ops")
	check("the file, AWS_PROFILE", S3Config{}, s3Credentials{"OPSKEY", "opssecret", "opstoken"})
	t.Setenv("AWS_PROFILE", "nobody")
	check("a profile the file lacks", S3Config{}, s3Credentials{})
	t.Setenv("AWS_PROFILE", "")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "")
	check("no ~/.aws/credentials", S3Config{}, s3Credentials{})
	if err := os.MkdirAll(filepath.Join(dir, ".aws"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file, filepath.Join(dir, ".aws", "credentials")); err != nil {
		t.Fatal(err)
	}
	check("~/.aws/credentials", S3Config{}, s3Credentials{"FILEKEY", "filesecret", ""})
}
